package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// errBad reports a value that does not match its knob's expectation, with
// nothing more specific to say than the expectation itself.
var errBad = errors.New("bad value")

// parseBool accepts 1/0, true/false, yes/no and on/off, in any case.
func parseBool(v string) (bool, error) {
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, errBad
}

// parseEnum returns the allowed value equal to v, ignoring case.
func parseEnum[T ~string](v string, allowed ...T) (T, error) {
	for _, a := range allowed {
		if strings.EqualFold(v, string(a)) {
			return a, nil
		}
	}
	return "", errBad
}

// parseInt accepts a decimal integer from lo to hi.
func parseInt(v string, lo, hi int) (int, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, errBad
	}
	if n < int64(lo) || n > int64(hi) {
		return 0, errBad
	}
	return int(n), nil
}

// sizeUnits are the suffixes parseSize accepts, binary multiples all.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30},
}

// parseSize accepts a byte count from lo to hi: a decimal integer with an
// optional K, M or G suffix (also KiB, MiB, GiB; any case), all binary.
func parseSize(v string, lo, hi int) (int, error) {
	digits, mult := v, int64(1)
	lower := strings.ToLower(v)
	for _, u := range sizeUnits {
		if strings.HasSuffix(lower, u.suffix) {
			digits, mult = strings.TrimSpace(v[:len(v)-len(u.suffix)]), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, errBad
	}
	if n < 0 || n > int64(hi)/mult || n*mult < int64(lo) {
		return 0, errBad
	}
	return int(n * mult), nil
}

// parseFloat accepts a finite decimal number for which ok returns true.
func parseFloat(v string, ok func(float64) bool) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errBad
	}
	if !ok(f) {
		return 0, errBad
	}
	return f, nil
}

// parseDuration accepts a Go duration ("500us", "2ms") from lo to hi.
func parseDuration(v string, lo, hi time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errBad
	}
	if d < lo || d > hi {
		return 0, errBad
	}
	return d, nil
}

// maxUID is the largest valid uid; (uid_t)-1 means "no uid" to the kernel.
const maxUID = math.MaxUint32 - 1

// parseUIDs accepts comma-separated decimal uids. It returns them in the
// order given; an empty item is an error.
func parseUIDs(v string) ([]uint32, error) {
	items := strings.Split(v, ",")
	uids := make([]uint32, 0, len(items))
	for i, item := range items {
		item = strings.TrimSpace(item)
		n, err := strconv.ParseUint(item, 10, 64)
		if err != nil || n > maxUID {
			return nil, fmt.Errorf("item %d %s is not a uid", i+1, strconv.Quote(clip(item)))
		}
		uids = append(uids, uint32(n))
	}
	return uids, nil
}

// isPowerOfTwo reports whether n is a positive power of two.
func isPowerOfTwo(n int) bool { return n > 0 && n&(n-1) == 0 }
