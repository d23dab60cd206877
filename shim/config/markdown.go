package config

import "strings"

// Markdown returns every knob as a GitHub-flavoured Markdown table
// (variable, default, allowed values, meaning) followed by a paragraph on
// the rules common to all knobs, ending with a newline. README.md holds it
// between its env-table markers.
func Markdown() string {
	var b strings.Builder
	b.WriteString("| Variable | Default | Allowed values | Meaning |\n")
	b.WriteString("| --- | --- | --- | --- |\n")
	for _, k := range knobs {
		def := mdText(k.ShownDefault())
		if k.DefaultText == "" && k.Default != "" {
			def = "`" + k.Default + "`"
		}
		b.WriteString("| `" + k.Name + "` | " + def + " | " + mdText(k.Expected) + " | " + mdText(k.Meaning) + " |\n")
	}
	b.WriteString("\nAn unset or empty variable takes its default; sizes take K, M and G suffixes (binary). " +
		"Any other `SDPSHIM_*` variable is an error too, so that a typo cannot pass unnoticed " +
		"(names starting with `SDPSHIM__` are reserved for sdpshim itself). " +
		"`sdpshim env` checks the current environment.\n")
	return b.String()
}

// mdText escapes the characters that would end a table cell or start
// emphasis.
var mdText = strings.NewReplacer(`\`, `\\`, "|", `\|`, "*", `\*`).Replace
