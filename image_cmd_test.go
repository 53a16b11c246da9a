package main

import "testing"

func TestPullable(t *testing.T) {
	for ref, want := range map[string]bool{
		"python:3.11-slim": true,
		"ghcr.io/o/r@sha256:0123456789012345678901234567890123456789012345678901234567890123": true,
		"127.0.0.1:5000/t/probe:v1": true,
		"mine":                      false,
		"sbx-data":                  false,
		"localhost:5000/foo":        false,
		"BAD REF":                   false,
		"":                          false,
	} {
		if got := pullable(ref); got != want {
			t.Errorf("pullable(%q) = %v, want %v", ref, got, want)
		}
	}
}
