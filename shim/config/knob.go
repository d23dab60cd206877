package config

// Knob describes one SDPSHIM_* variable: the row of the table that Load,
// `sdpshim env` and the README are generated from.
type Knob struct {
	// Name is the environment variable, e.g. "SDPSHIM_BLOCKS".
	Name string
	// Default is the value used when the variable is unset or empty,
	// written in the variable's own syntax; "" for a default derived at
	// load time (see DefaultText).
	Default string
	// DefaultText describes a derived default for people; "" when Default
	// says it all.
	DefaultText string
	// Expected describes the accepted values; error messages say
	// "expected " + Expected.
	Expected string
	// Meaning says in one line what the knob does.
	Meaning string

	// set parses v into c. On error it leaves c unchanged and returns
	// errBad, or an error whose text narrows the problem down.
	set func(c *Config, v string, l *loader) error
}

// ShownDefault returns the default as people should read it: DefaultText
// when set, else Default, else "none".
func (k Knob) ShownDefault() string {
	switch {
	case k.DefaultText != "":
		return k.DefaultText
	case k.Default != "":
		return k.Default
	}
	return "none"
}

// Knobs returns every knob, in documentation order. The slice is a copy.
func Knobs() []Knob {
	out := make([]Knob, len(knobs))
	copy(out, knobs)
	return out
}

// LookupKnob returns the knob called name.
func LookupKnob(name string) (Knob, bool) {
	for _, k := range knobs {
		if k.Name == name {
			return k, true
		}
	}
	return Knob{}, false
}

// store returns a function that writes a parse result to dst only when
// parsing succeeded, so that a bad value leaves the default in place.
func store[T any](dst *T) func(T, error) error {
	return func(v T, err error) error {
		if err == nil {
			*dst = v
		}
		return err
	}
}
