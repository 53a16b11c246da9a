package initbin

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// TestSealedMemfdIsImmutable holds the memfd the init is exec'd from to
// its seals (CVE-2019-5736: no process, root included, may change the
// binary the next sandbox runs): write, pwrite, truncation either way, a
// writable shared mapping, a write through a fresh open of
// /proc/self/fd/N, and removing or adding seals all fail, and the
// content stays what was written.
func TestSealedMemfdIsImmutable(t *testing.T) {
	img := bytes.Repeat([]byte("\x7fELF sbx-init test image "), 4096)
	fd, err := sealedMemfd("sbx-init-test", img)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if fd < fdFloor {
		t.Errorf("memfd is fd %d, want >= %d", fd, fdFloor)
	}
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Errorf("memfd fd flags %#x, %v: want FD_CLOEXEC", flags, err)
	}
	wantEPERM := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, unix.EPERM) {
			t.Errorf("%s: %v, want EPERM (F_SEAL_WRITE/SHRINK/GROW/SEAL)", what, err)
		}
	}
	_, err = unix.Write(fd, []byte("x"))
	wantEPERM("write", err)
	_, err = unix.Pwrite(fd, []byte("x"), 0)
	wantEPERM("pwrite at 0", err)
	_, err = unix.Pwrite(fd, []byte("x"), int64(len(img)))
	wantEPERM("pwrite past the end", err)
	wantEPERM("ftruncate shorter", unix.Ftruncate(fd, 1))
	wantEPERM("ftruncate longer", unix.Ftruncate(fd, int64(len(img))+4096))
	wantEPERM("fallocate", unix.Fallocate(fd, 0, int64(len(img)), 4096))
	_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_FUTURE_WRITE)
	wantEPERM("F_ADD_SEALS after F_SEAL_SEAL", err)
	if _, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); !errors.Is(err, unix.EPERM) {
		t.Errorf("mmap PROT_WRITE MAP_SHARED: %v, want EPERM", err)
	}
	// A new open file description of the same inode, for writing, as a
	// process that reached /proc/PID/exe or /proc/PID/fd/N would get.
	path := fmt.Sprintf("/proc/self/fd/%d", fd)
	if f, err := os.OpenFile(path, os.O_WRONLY, 0); err == nil {
		_, err = f.Write([]byte("x"))
		f.Close()
		wantEPERM("write through "+path, err)
	} else if !errors.Is(err, unix.ETXTBSY) && !errors.Is(err, unix.EPERM) {
		t.Errorf("open %s O_WRONLY: %v", path, err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, img) {
		t.Errorf("memfd holds %d bytes, not the %d written", len(got), len(img))
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil || seals&(unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE) != unix.F_SEAL_SEAL|unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_WRITE {
		t.Errorf("F_GET_SEALS = %#x, %v", seals, err)
	}
}

// TestGetWithoutImage: a build without sbx_embedinit runs sbx itself.
func TestGetWithoutImage(t *testing.T) {
	if Embedded() {
		t.Skip("built with sbx_embedinit")
	}
	Prepare()
	if e := Get(); e.Kind != KindSelf || e.Path != "/proc/self/exe" {
		t.Errorf("Get() = %+v; want /proc/self/exe", e)
	}
}

// TestProbe: Probe accepts only what sbx-init does outside a sandbox
// (its line on stderr, exit status 2), and refuses an exec that fails or
// a program that is not sbx-init.
func TestProbe(t *testing.T) {
	dir := t.TempDir()
	fake := dir + "/fake-init"
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho '"+notInitMsg+" that sbx runs' >&2\nexit 2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := (Exe{Kind: KindMemfd, Path: fake}).Probe(); err != nil {
		t.Errorf("Probe(fake sbx-init) = %v, want nil", err)
	}
	noexec := dir + "/not-executable"
	os.WriteFile(noexec, []byte("x"), 0o644)
	for _, p := range []string{"/bin/true", "/bin/false", noexec, dir + "/missing"} {
		if err := (Exe{Kind: KindMemfd, Path: p}).Probe(); err == nil {
			t.Errorf("Probe(%s) = nil, want an error", p)
		}
	}
	if err := (Exe{Kind: KindSelf, Path: "/bin/false"}).Probe(); err != nil {
		t.Errorf("Probe of KindSelf = %v, want nil (nothing to probe)", err)
	}
}
