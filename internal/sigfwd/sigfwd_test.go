package sigfwd

import (
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// TestChannelGetsSignalsAfterTheHandOver: once Channel returned, a
// forwarded signal is the run's, not preCommit's (which would kill the
// test process).
func TestChannelGetsSignalsAfterTheHandOver(t *testing.T) {
	f := Start()
	sigs := f.Channel()
	defer signal.Stop(sigs)
	if f.RegisteredNS() <= 0 {
		t.Errorf("RegisteredNS %d after Channel, want the registration's time", f.RegisteredNS())
	}
	for _, sig := range []syscall.Signal{syscall.SIGHUP, syscall.SIGINT, syscall.SIGTERM} {
		syscall.Kill(syscall.Getpid(), sig)
		select {
		case got := <-sigs:
			if got != sig {
				t.Errorf("sent %v, the channel got %v", sig, got)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%v never reached the channel", sig)
		}
	}
}

// TestInLineRegisters: InLine's channel gets the forwarded signals.
func TestInLineRegisters(t *testing.T) {
	sigs := InLine()
	defer signal.Stop(sigs)
	syscall.Kill(syscall.Getpid(), syscall.SIGHUP)
	select {
	case got := <-sigs:
		if got != syscall.SIGHUP {
			t.Errorf("got %v, want SIGHUP", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("SIGHUP never reached the channel")
	}
}
