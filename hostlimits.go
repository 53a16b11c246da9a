package main

import (
	"fmt"
	"runtime"
	"strconv"

	"github.com/sbx-sandbox/sbx/profiles"
)

// clampToHost lowers the values the host cannot give and says so: a CPU
// quota above the CPUs sbx may run on (sched_getaffinity(2), which
// runtime.NumCPU reads) limits nothing, and reads as if the run had them
// (issue 19, point 15). A built-in profile's value is clamped silently:
// standard's 2 CPUs on a 1-CPU host is no one's mistake.
func clampToHost(p *profiles.Profile) []string {
	var warnings []string
	if host := float64(runtime.NumCPU()); p.Limits.CPUs > host {
		o := p.Origin("limits.cpus")
		if o.Kind == profiles.FromFlag || o.Kind == profiles.FromFile {
			what := "limits.cpus " + strconv.FormatFloat(p.Limits.CPUs, 'g', -1, 64) + " (" + o.String() + ")"
			if o.Kind == profiles.FromFlag {
				what = o.Name + " " + strconv.Quote(o.Text)
			}
			warnings = append(warnings, fmt.Sprintf("%s: this host gives sbx %g CPUs; clamped to %g", what, host, host))
		}
		p.Limits.CPUs = host
	}
	return warnings
}
