// Package rawabi enters the kernel through the other syscall ABIs of the
// machine, which the seccomp tests must see refused. Only tests import it;
// it has code for amd64 only.
package rawabi
