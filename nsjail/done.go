package nsjail

// Done is closed once the sandbox's init is gone: its payload ended, it
// was closed, or it died while it waited (a pool drops such a sandbox
// instead of handing it out).
func (sb *Sandbox) Done() <-chan struct{} { return sb.s.watchDone }
