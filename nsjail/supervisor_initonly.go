//go:build sbx_init_only

package nsjail

import "os"

// The init binary's stand-ins for the supervisor's files that would link
// packages the init has no use for: package net (proxy_serve_linux.go,
// egress_linux.go) and image/png (figures_png.go), whose package inits
// alone keep ~230 KB in the image every sandbox copies (issue 13). The
// init binary only ever runs Init, so these are never reached there.
// Should one be, it fails closed: a proxied run fails at the init's
// proxy step (its socket is closed), and every figure is dropped.

// ProxyServer is the supervisor's proxy; in the init binary it has
// nothing to serve with.
type ProxyServer interface {
	Close() error
}

// prepareEgress: no EgressServer in the init binary, so no DNS stub and
// no forwards are asked for, as for a ProxyServer that is not one.
func prepareEgress(*Job) {}

func noProxyFor(ProxyServer) string { return "localhost,127.0.0.1,::1" }

// serveProxy closes the socket pair's end: the init's sendmsg of the
// proxy's listener then fails, and so does the run.
func (s *supervisor) serveProxy(sock *os.File) { sock.Close() }

// checkPNG: figures_png.go is the supervisor's; should this ever be
// reached, it fails closed: no figure is taken.
func checkPNG([]byte) error { return errInitOnly }
