package seed000

import (
	"encoding/binary"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sdpshim/sdpshim/core/wait"
)

// The paper's video case: cameraStreams streams on one channel, each
// writing a 640x480x3 frame every 40 ms (25 frames/s), their start times
// spread evenly over one frame interval. The child reads every stream,
// counts the bytes it reads per cameraBin (from the parent's start, on
// the shared clock) and the delivery latency of each frame (its first 8
// bytes carry the time the parent began writing it). Both sides wait with
// the default (adaptive) policy: the streams are paced, idle most of the
// time, as in the shim.

const (
	cameraStreams = 12
	cameraFPS     = 25
	cameraFrame   = 640 * 480 * 3
	cameraBin     = 100 * time.Millisecond
	cameraWait    = wait.WaitModeAdaptive
)

// CameraResult is one transport's camera run.
type CameraResult struct {
	Transport   string
	Duration    time.Duration
	Rates       []float64       // MB/s per bin, the whole bins of the run
	Lat         []time.Duration // per frame
	Frames      int             // frames written
	SenderCPU   time.Duration
	ReceiverCPU time.Duration
}

// camera runs the camera case over tr for dur.
func camera(tr string, dur time.Duration) (CameraResult, error) {
	res := CameraResult{Transport: tr, Duration: dur}
	start := monoNow() + int64(200*time.Millisecond) // after the setup
	j := job{Role: "camera-recv", Wait: cameraWait, Start: start, Bin: int64(cameraBin),
		Streams: cameraStreams, Frame: cameraFrame, Run: int64(dur), Procs: spinProcs}
	restore := setProcs(spinProcs)
	defer restore()
	pp, l, ch, err := streamPeer(j, tr)
	if err != nil {
		return res, err
	}
	defer l.prov.Close()
	frames := int(dur / (time.Second / cameraFPS))
	interval := int64(time.Second / cameraFPS)
	var wg sync.WaitGroup
	errs := make(chan error, cameraStreams)
	cpu0 := cpuNow()
	for i := 0; i < cameraStreams; i++ {
		s, err := ch.Open()
		if err != nil {
			ch.Close()
			pp.kill()
			return res, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			frame := make([]byte, cameraFrame)
			for k := range frame {
				frame[k] = byte(k + i)
			}
			s.SetWriteDeadline(time.Now().Add(dur + time.Minute))
			offset := int64(i) * interval / cameraStreams
			for k := 0; k < frames; k++ {
				at := start + offset + int64(k)*interval
				if d := at - monoNow(); d > 0 {
					time.Sleep(time.Duration(d))
				}
				binary.LittleEndian.PutUint64(frame, uint64(monoNow()))
				if _, err := s.Write(frame); err != nil {
					errs <- fmt.Errorf("stream %d frame %d: %w", i, k, err)
					return
				}
			}
			if err := s.CloseWrite(); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	res.SenderCPU = cpuNow() - cpu0
	res.Frames = frames * cameraStreams
	rep, err := pp.finish(dur + time.Minute)
	ch.Close()
	if err != nil {
		return res, err
	}
	select {
	case err := <-errs:
		return res, err
	default:
	}
	whole := int(dur / cameraBin)
	res.Rates = binRates(rep.Bins[:min(whole, len(rep.Bins))], cameraBin)
	for _, ns := range rep.Lat {
		res.Lat = append(res.Lat, time.Duration(ns))
	}
	res.ReceiverCPU = time.Duration(rep.CPU)
	if len(res.Lat) != res.Frames {
		return res, fmt.Errorf("%d frames delivered of %d", len(res.Lat), res.Frames)
	}
	return res, nil
}

func init() {
	roles["camera-recv"] = cameraRecv
}

// cameraRecv is the child of camera: it reads j.Streams streams to EOF.
func cameraRecv(j job, l *link) (report, error) {
	ch, err := openChannel(l, j.Wait)
	if err != nil {
		return report{}, err
	}
	defer ch.Close()
	bins := make([]int64, (j.Run+int64(5*time.Second))/j.Bin)
	var (
		mu   sync.Mutex
		lat  []int64
		wg   sync.WaitGroup
		errs = make(chan error, j.Streams)
	)
	cpu0 := cpuNow()
	for i := 0; i < j.Streams; i++ {
		s, err := ch.Accept(time.Now().Add(setupTimeout))
		if err != nil {
			return report{}, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			buf := make([]byte, j.Frame)
			for {
				got := 0
				for got < len(buf) {
					n, err := s.Read(buf[got:])
					if n > 0 {
						if t := monoNow() - j.Start; t >= 0 && t/j.Bin < int64(len(bins)) {
							atomic.AddInt64(&bins[t/j.Bin], int64(n))
						}
					}
					got += n
					if err == io.EOF && got == 0 {
						return
					}
					if err != nil {
						errs <- err
						return
					}
				}
				d := monoNow() - int64(binary.LittleEndian.Uint64(buf))
				mu.Lock()
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	rep := report{Bins: bins, Lat: lat, CPU: int64(cpuNow() - cpu0)}
	select {
	case err := <-errs:
		return rep, err
	default:
	}
	return rep, nil
}
