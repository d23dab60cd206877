package childproc

import (
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const testEnv = "SDPSHIM_CHILDPROC_TEST"

type testReport struct {
	Value string
	Got   string // what the child read from FD
}

func TestMain(m *testing.M) {
	Serve(testEnv, func(value string) any {
		if value == "fail" {
			os.Exit(3)
		}
		if value == "hang" {
			time.Sleep(time.Minute)
		}
		buf := make([]byte, 16)
		n, _ := unix.Read(FD, buf)
		return testReport{Value: value, Got: string(buf[:max(n, 0)])}
	})
	os.Exit(m.Run())
}

func TestStartFinish(t *testing.T) {
	p, fd, err := Start(testEnv, "job-1")
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.Write(fd, []byte("hello")); err != nil {
		t.Fatal(err)
	}
	var rep testReport
	if err := p.Finish(10*time.Second, &rep); err != nil {
		t.Fatal(err)
	}
	if rep != (testReport{Value: "job-1", Got: "hello"}) {
		t.Errorf("report %+v", rep)
	}
}

func TestFinishFailures(t *testing.T) {
	p, fd, err := Start(testEnv, "fail")
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	var rep testReport
	if err := p.Finish(10*time.Second, &rep); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("a failed child: %v", err)
	}
	p, fd, err = Start(testEnv, "hang")
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(fd)
	if err := p.Finish(100*time.Millisecond, &rep); err == nil || !strings.Contains(err.Error(), "did not finish") {
		t.Errorf("a hung child: %v", err)
	}
}
