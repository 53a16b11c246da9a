package cgroup

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Lower lowers the memory and pids limits of a Group in use (a warm
// sandbox claimed for a request that asks for less): each value above 0
// is written where that limit is enforced. The caller never raises one
// (it compares with what it asked of New). Lowering memory below what the
// group holds makes the kernel reclaim, and past that: v2 OOM-kills, v1
// refuses the write (EBUSY, cgroup-v1/memory.rst 2.5), which is returned.
func (g *Group) Lower(memoryBytes, pids int64) error {
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.destroyed {
		return errors.New("lower limits: cgroup already destroyed")
	}
	var errs []error
	if memoryBytes > 0 {
		if _, ok := g.enforced[KindMemory]; ok {
			errs = append(errs, g.lowerMemory(memoryBytes))
		}
	}
	if pids > 0 {
		if _, ok := g.enforced[KindPids]; ok {
			if dir, ok := g.dirFor("pids"); ok {
				errs = append(errs, writeFile(filepath.Join(dir, "pids.max"), strconv.FormatInt(pids, 10)))
			}
		}
	}
	return errors.Join(errs...)
}

func (g *Group) lowerMemory(v int64) error {
	s := strconv.FormatInt(v, 10)
	dir, ok := g.dirFor("memory")
	if !ok {
		return fmt.Errorf("lower memory: no memory directory")
	}
	if g.mode == ModeV2 {
		return writeFile(filepath.Join(dir, "memory.max"), s)
	}
	// memsw >= limit at all times: the limit goes down first, then memsw
	// to the same value, which keeps swap forbidden (memory.rst 2.4).
	if err := writeFile(filepath.Join(dir, "memory.limit_in_bytes"), s); err != nil {
		return err
	}
	err := writeFile(filepath.Join(dir, "memory.memsw.limit_in_bytes"), s)
	if errors.Is(err, unix.ENOENT) {
		return nil // no swap accounting: swappiness 0 holds (applyV1)
	}
	return err
}
