package cgroup

import (
	"testing"
	"time"
)

func TestSplitCPU(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		total, user, sys, wantUser, wantSys time.Duration
	}{
		{13 * ms, 8 * ms, 4 * ms, 8666666 * time.Nanosecond, 13*ms - 8666666*time.Nanosecond},
		{3 * ms, 0, 0, 3 * ms, 0},
		{3 * ms, 4 * ms, 0, 3 * ms, 0},
		{3 * ms, 0, 4 * ms, 0, 3 * ms},
	}
	for _, tc := range cases {
		u, s := splitCPU(tc.total, tc.user, tc.sys)
		if u != tc.wantUser || s != tc.wantSys || u+s != tc.total {
			t.Errorf("splitCPU(%v, %v, %v) = %v, %v; want %v, %v", tc.total, tc.user, tc.sys, u, s, tc.wantUser, tc.wantSys)
		}
	}
}
