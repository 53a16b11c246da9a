//go:build integration

package tests

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sbx-sandbox/sbx/nsjail"
)

func example(name string) string { return filepath.Join(exampleDir, name) }

// quarterlyRevenue computes, independently of pandas, what the sales
// report must print.
func quarterlyRevenue(t *testing.T) map[string]float64 {
	f, err := os.Open(example("sales.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, r := range rows[1:] {
		d, _ := time.Parse("2006-01-02", r[0])
		units, _ := strconv.ParseFloat(r[3], 64)
		price, _ := strconv.ParseFloat(r[4], 64)
		out[fmt.Sprintf("%dQ%d", d.Year(), (int(d.Month())-1)/3+1)] += units * price
	}
	return out
}

func TestFlowSalesReport(t *testing.T) {
	want := quarterlyRevenue(t)
	forEach(t, func(t *testing.T, r runner) {
		c := newOutputCase(t)
		res, out := r.result(t, "--profile", "standard", "--file", example("sales.csv"), "--output-dir", c.out, example("sales_report.py"))
		if res.Status != nsjail.StatusOK {
			t.Fatalf("status %s (%s)\nstderr %s\nsbx: %s", res.Status, res.Message, res.Stderr, out.stderr)
		}
		for q, rev := range want {
			line := ""
			for _, l := range strings.Split(res.Stdout, "\n") {
				if strings.HasPrefix(l, q+" ") {
					line = l
				}
			}
			f := strings.Fields(line)
			if len(f) != 2 {
				t.Fatalf("no line for %s in:\n%s", q, res.Stdout)
			}
			got, _ := strconv.ParseFloat(f[1], 64)
			if math.Abs(got-rev) > 0.01 {
				t.Errorf("%s: printed %v, want %.2f", q, got, rev)
			}
		}
		png, err := os.ReadFile(filepath.Join(c.out, "report.png"))
		if err != nil {
			t.Fatalf("report.png did not come out: %v (files %+v)", err, res.Files)
		}
		if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || string(png[12:16]) != "IHDR" {
			t.Fatalf("report.png is not a PNG")
		}
		if w, h := binary.BigEndian.Uint32(png[16:20]), binary.BigEndian.Uint32(png[20:24]); w < 100 || h < 100 {
			t.Errorf("report.png is %dx%d", w, h)
		}
		if strings.Contains(res.Stderr, "rror") {
			t.Errorf("stderr: %s", res.Stderr)
		}
		// Caches go to /tmp: the run's files are what its code wrote.
		if len(res.Files) != 1 || res.Files[0].Path != "report.png" {
			t.Errorf("files %+v, want report.png alone", res.Files)
		}
	})
}

func TestFlowErrorSummary(t *testing.T) {
	want := [][]string{{"file", "errors"}}
	logs, _ := filepath.Glob(example("logs/*.log"))
	sort.Strings(logs)
	for _, p := range logs {
		b, _ := os.ReadFile(p)
		want = append(want, []string{filepath.Base(p), strconv.Itoa(bytes.Count(b, []byte(" ERROR ")))})
	}
	forEach(t, func(t *testing.T, r runner) {
		c := newOutputCase(t)
		res, out := r.result(t, "--input-dir", example("logs"), "--output-dir", c.out, example("error_summary.py"))
		if res.Status != nsjail.StatusOK {
			t.Fatalf("status %s (%s)\nstderr %s\nsbx: %s", res.Status, res.Message, res.Stderr, out.stderr)
		}
		f, err := os.Open(filepath.Join(c.out, "error_summary.csv"))
		if err != nil {
			t.Fatalf("error_summary.csv did not come out: %v", err)
		}
		defer f.Close()
		got, err := csv.NewReader(f).ReadAll()
		if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("error_summary.csv = %v (%v), want %v", got, err, want)
		}
		if len(res.Inputs) != len(logs)+1 { // the logs and the script
			t.Errorf("inputs %+v", res.Inputs)
		}
	})
}

func TestInputDir(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		dir, err := os.MkdirTemp("", "inputdir-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		os.Chmod(dir, 0o755)
		os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
		os.WriteFile(filepath.Join(dir, "a.txt"), []byte("A"), 0o644)
		os.WriteFile(filepath.Join(dir, "sub", "b.txt"), []byte("B"), 0o644)
		os.Symlink("/etc/passwd", filepath.Join(dir, "link"))
		var got map[string]string
		res := r.okResult(t, &got, "--input-dir", dir, "-c",
			"import json,os\nout={}\nfor d,_,fs in os.walk('.'):\n  for f in fs: out[os.path.join(d,f)[2:]]=open(os.path.join(d,f)).read()\nprint(json.dumps(out))")
		if fmt.Sprint(got) != fmt.Sprint(map[string]string{"a.txt": "A", "sub/b.txt": "B"}) {
			t.Errorf("workspace held %v", got)
		}
		if !strings.Contains(strings.Join(res.Warnings, "\n"), "--input-dir: link skipped: not a regular file") {
			t.Errorf("warnings %v, want the skipped symlink named", res.Warnings)
		}
		if len(res.Files) != 0 {
			t.Errorf("unchanged inputs listed as changed: %+v", res.Files)
		}
	})
}

func TestAuditLog(t *testing.T) {
	forEach(t, func(t *testing.T, r runner) {
		dir, err := os.MkdirTemp("", "auditlog-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		os.Chmod(dir, 0o777)
		log := filepath.Join(dir, "audit.jsonl")
		runs := []struct {
			args   []string
			status nsjail.Status
		}{
			{[]string{data("hello.py")}, nsjail.StatusOK},
			{[]string{"--audit-output", data("exit3.py")}, nsjail.StatusExit},
			{[]string{"--timeout", "0.5s", "-c", "import time; time.sleep(30)"}, nsjail.StatusTimeout},
			{[]string{data("no-such-script.py")}, nsjail.StatusSetupError},
			{[]string{"--rootfs", "/no/such/dir", data("hello.py")}, nsjail.StatusSetupError},
		}
		for _, run := range runs {
			r.exec(t, "", append([]string{"exec", "--audit-log", log}, run.args...)...)
		}
		f, err := os.Open(log)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fi, _ := f.Stat()
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("audit log mode %v, want 0600", fi.Mode().Perm())
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		var n int
		for ; sc.Scan(); n++ {
			var e map[string]any
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				t.Fatalf("line %d is not JSON: %v\n%s", n+1, err, sc.Text())
			}
			if n >= len(runs) {
				continue
			}
			for _, k := range []string{"id", "started_at", "finished_at", "invoking_uid", "profile", "profile_sha256", "code_sha256", "inputs", "usage", "status", "files"} {
				if _, ok := e[k]; !ok {
					t.Errorf("line %d lacks %s", n+1, k)
				}
			}
			if e["status"] != string(runs[n].status) || e["invoking_uid"] != float64(r.uid) {
				t.Errorf("line %d: status %v uid %v, want %s %d", n+1, e["status"], e["invoking_uid"], runs[n].status, r.uid)
			}
			_, hasOut := e["stdout"]
			if hasOut != (n == 1) {
				t.Errorf("line %d: stdout logged %v, want it only with --audit-output", n+1, hasOut)
			}
		}
		if n != len(runs) {
			t.Errorf("%d audit lines for %d runs", n, len(runs))
		}
		// An audit log that cannot be written stops the run before it starts.
		out := r.exec(t, "", "exec", "--audit-log", dir, "-c", "open('/tmp/x','w')")
		if out.code != nsjail.ExitSbxFailed || !strings.Contains(out.stderr, "--audit-log") {
			t.Errorf("unwritable audit log: exit %d, stderr %q", out.code, out.stderr)
		}
	})
}
