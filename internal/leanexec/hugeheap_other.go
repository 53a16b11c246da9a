//go:build !linux

package leanexec

// adviseHugeHeap: transparent huge pages are Linux's.
func adviseHugeHeap() {}
