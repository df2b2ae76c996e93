package envtest

// The scale story's readers of /proc and of the manager's metrics exposition: what they read,
// and that text they cannot read is refused with a named error instead of read as zero.

import (
	"errors"
	"testing"
)

func TestParseProcStats(t *testing.T) {
	status := []byte("Name:\tmanager\nVmPeak:\t 900000 kB\nVmHWM:\t  419020 kB\nVmRSS:\t  398848 kB\nThreads:\t12\n")
	// The command name holds a space and a parenthesis; utime 5000 and stime 1100 ticks.
	stat := []byte("4242 (man ager)) S 1 4242 4242 0 -1 4194560 100 0 0 0 5000 1100 0 0 20 0 12 0 100 1000 100 18446744073709551615")
	s, err := parseProcStats(status, stat)
	if err != nil {
		t.Fatal(err)
	}
	if s.RSSBytes != 398848<<10 || s.HWMBytes != 419020<<10 || s.CPUSeconds != 61 {
		t.Fatalf("parsed %+v, want RSS 398848 KiB, HWM 419020 KiB, 61 CPU s", s)
	}
}

// TestParseProcStatsRefusesUnreadable is the twin: a status without VmRSS (a kernel thread, or
// another format) and a truncated stat are errProcFormat, not zero figures.
func TestParseProcStatsRefusesUnreadable(t *testing.T) {
	stat := []byte("1 (m) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0")
	if _, err := parseProcStats([]byte("Name:\tkthreadd\nThreads:\t1\n"), stat); !errors.Is(err, errProcFormat) {
		t.Fatalf("status without VmRSS: err = %v, want errProcFormat", err)
	}
	status := []byte("VmHWM:\t1 kB\nVmRSS:\t1 kB\n")
	if _, err := parseProcStats(status, []byte("1 (m) S 1 1")); !errors.Is(err, errProcFormat) {
		t.Fatalf("truncated stat: err = %v, want errProcFormat", err)
	}
}

func TestSumSamples(t *testing.T) {
	text := []byte(`# HELP rest_client_requests_total Number of HTTP requests.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:1",method="GET"} 7
rest_client_requests_total{code="201",host="127.0.0.1:1",method="POST"} 3
rest_client_requests_total{code="200",host="127.0.0.1:1",method="PATCH"} 2000
rest_client_requests_total{code="409",host="127.0.0.1:1",method="PATCH"} 5
controller_runtime_reconcile_total{controller="servicedeployment",result="requeue_after"} 2196
controller_runtime_reconcile_total{controller="mcpserviceprofile",result="success"} 1000
`)
	for _, tc := range []struct {
		name  string
		match map[string]string
		want  float64
	}{
		{"rest_client_requests_total", nil, 2015},
		{"rest_client_requests_total", map[string]string{"method": "PATCH"}, 2005},
		{"controller_runtime_reconcile_total", map[string]string{"controller": "servicedeployment"}, 2196},
	} {
		got, err := sumSamples(text, tc.name, tc.match)
		if err != nil || got != tc.want {
			t.Errorf("%s %v = %v, %v; want %v", tc.name, tc.match, got, err, tc.want)
		}
	}
}

// TestSumSamplesRefusesMissing is the twin: a metric or label value with no sample is
// errNoSample (not 0), and a sample whose value does not parse is an error.
func TestSumSamplesRefusesMissing(t *testing.T) {
	text := []byte("controller_runtime_reconcile_total{controller=\"mcpserviceprofile\"} 3\nbroken_total x\n")
	if _, err := sumSamples(text, "controller_runtime_reconcile_total", map[string]string{"controller": "servicedeployment"}); !errors.Is(err, errNoSample) {
		t.Fatalf("missing label value: err = %v, want errNoSample", err)
	}
	if _, err := sumSamples(text, "rest_client_requests_total", nil); !errors.Is(err, errNoSample) {
		t.Fatalf("missing metric: err = %v, want errNoSample", err)
	}
	if _, err := sumSamples(text, "broken_total", nil); err == nil || errors.Is(err, errNoSample) {
		t.Fatalf("unparsable value: err = %v, want a parse error", err)
	}
}
