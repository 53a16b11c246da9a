package profiles

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// FromRequest marks a value a request lowered (sbx serve's "limits").
const FromRequest OriginKind = "request"

// LimitKeys are the keys Lower takes, without their "limits." prefix:
// every limit that is a number (a size, a duration, a count, CPUs).
func LimitKeys() []string {
	var out []string
	for i := range fields {
		if name, ok := strings.CutPrefix(fields[i].key, "limits."); ok && isNumeric(fields[i].kind) {
			out = append(out, name)
		}
	}
	return out
}

func isNumeric(k kind) bool {
	return k == kindSize || k == kindDuration || k == kindInt || k == kindFloat
}

// Lower sets limits a caller that is not trusted with the profile asked
// for: each key of req (a LimitKeys name, "memory", "wall_time") with its
// value written as in a profile ("256M", "1.5s", "10"). A value may only
// lower the profile's (issue 14: "a request may lower a profile's limits,
// never raise them"): one above it, an unknown key or a bad value is an
// error naming the key, and the profile is left as it was. All the
// problems are returned together, in key order.
func (p *Profile) Lower(req map[string]string) error {
	keys := make([]string, 0, len(req))
	for k := range req {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	next := *p
	// The copy gets its own origins: p is untouched until all is well.
	next.origins = make(map[string]Origin, len(p.origins)+len(req))
	for k, o := range p.origins {
		next.origins[k] = o
	}
	var errs Errors
	for _, name := range keys {
		text := req[name]
		key := "limits." + name
		o := Origin{Kind: FromRequest, Name: "limits." + name, Text: text}
		f := lookupField(key)
		if f == nil || !isNumeric(f.kind) {
			msg := fmt.Sprintf("limits.%s: not a limit a request may set (one of %s)", name, strings.Join(LimitKeys(), ", "))
			if best := Closest(name, LimitKeys()); best != "" {
				msg = fmt.Sprintf("limits.%s: not a limit a request may set (did you mean %s?)", name, best)
			}
			errs = append(errs, &Error{Origin: o, Msg: msg})
			continue
		}
		was := f.value(p)
		if err := f.setFlag(&next, []string{text}); err != nil {
			errs = append(errs, newError(o, "limits.%s %s: %v", name, strconv.Quote(text), err))
			continue
		}
		if above(f, &next, p) {
			errs = append(errs, newError(o, "limits.%s %s: above the profile's %s (%s); a request may only lower a limit",
				name, strconv.Quote(text), flagText(was), p.Name))
			continue
		}
		next.setOrigin(key, o)
	}
	if len(errs) > 0 {
		return errs
	}
	if err := next.Validate(); err != nil {
		return err
	}
	*p = next
	return nil
}

// above tells whether f's value in next is more than in was.
func above(f *field, next, was *Profile) bool {
	if v, ok := f.ptr(next).(*float64); ok {
		return *v > *f.ptr(was).(*float64)
	}
	n, _ := f.number(next)
	w, _ := f.number(was)
	return n > w
}
