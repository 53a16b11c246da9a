package profiles

// Setting is one key of an effective profile, for `sbx profile show`.
type Setting struct {
	Key string `json:"-"`
	// Value is as TOML holds it: a string (sizes and durations in their
	// human form, "256M", "10s"), an int64, a float64 or a []string.
	Value  any    `json:"value"`
	Origin Origin `json:"source"`
}

// Settings lists every key of the profile with its value and origin, in
// schema order, then the environment variables by name.
func (p *Profile) Settings() []Setting {
	out := make([]Setting, 0, len(fields)+len(p.Env))
	for i := range fields {
		f := &fields[i]
		out = append(out, Setting{Key: f.key, Value: f.value(p), Origin: p.Origin(f.key)})
	}
	for _, name := range sortedKeys(p.Env) {
		key := joinKey("env", name)
		out = append(out, Setting{Key: key, Value: p.Env[name], Origin: p.Origin(key)})
	}
	return out
}

// FormatValue prints a Setting's value as a TOML literal.
func FormatValue(v any) string { return formatTOML(v) }
