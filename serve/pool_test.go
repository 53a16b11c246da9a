package serve

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestParsePools(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want string // fmt of the specs, or the error's start
	}{
		{"one", []string{"standard=4"}, "[{standard 4 4}]"},
		{"max", []string{"standard=2", " data=1:8"}, "[{standard 2 2} {data 1 8}]"},
		{"grow from none", []string{"data=0:2"}, "[{data 0 2}]"},
		{"empty entry", []string{""}, "[]"},
		{"no =", []string{"standard"}, `--pool "standard": no PROFILE=`},
		{"no name", []string{"=2"}, `--pool "=2": no PROFILE=`},
		{"bad N", []string{"standard=x"}, `--pool "standard=x": N "x": want a number from 0 to 256`},
		{"negative", []string{"standard=-1"}, `--pool "standard=-1": N "-1"`},
		{"huge", []string{"standard=10000"}, `--pool "standard=10000": N "10000"`},
		{"bad MAX", []string{"standard=1:y"}, `--pool "standard=1:y": MAX "y"`},
		{"MAX below N", []string{"standard=3:2"}, `--pool "standard=3:2": MAX 2 below N 3`},
		{"zero", []string{"standard=0"}, `--pool "standard=0": a pool of 0 sandboxes`},
		{"twice", []string{"standard=1", "standard=2"}, `--pool "standard=2": profile standard given twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePools(tc.in)
			s := fmt.Sprint(got)
			if got == nil && err == nil {
				s = "[]"
			}
			if err != nil {
				s = err.Error()
			}
			if !strings.HasPrefix(s, tc.want) {
				t.Errorf("ParsePools(%q) = %s, want %s", tc.in, s, tc.want)
			}
		})
	}
}

// TestNewPoolsChecks: a --pool entry must name an offered profile, and a
// profile with the network on cannot be pooled; the errors say so.
func TestNewPoolsChecks(t *testing.T) {
	a := newAdmission(1, 0)
	if _, err := newPools([]PoolSpec{{Profile: "data", Min: 1, Max: 1}}, []string{"standard"}, startBudget{a}, nil); err == nil || !strings.Contains(err.Error(), "--pool data=1: profile data is not offered") {
		t.Errorf("an unoffered profile: %v", err)
	}
	ps, err := newPools(nil, []string{"standard"}, startBudget{a}, nil)
	if err != nil || ps.broken() != "" || ps.info("standard") != nil || len(ps.stats()) != 0 {
		t.Errorf("no pools: %v %q", err, ps.broken())
	}
	ps.start(t.Logf)
	ps.close()
}

// TestStartBudget: a pool's start takes a worker, but is not a run.
func TestStartBudget(t *testing.T) {
	a := newAdmission(1, 0)
	b := startBudget{a}
	if err := b.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	if a.running() != 0 {
		t.Errorf("a start counts as %d runs", a.running())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := a.acquire(ctx); err == nil {
		t.Error("a run took the worker a start holds")
	}
	b.Release()
	if err := a.acquire(context.Background()); err != nil || a.running() != 1 {
		t.Errorf("after the start: %v, running %d", err, a.running())
	}
}
