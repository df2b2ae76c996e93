package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"
)

// The output formats of -o/--output, kubectl's names. Every verb that prints objects takes the
// ones that fit it; a verb that writes a file takes --out-file instead (docs/cli.md).
const (
	formatHuman = "" // the verb's table or description
	formatJSON  = "json"
	formatYAML  = "yaml"
	formatName  = "name"
	formatWide  = "wide"
)

// outputFlag is a verb's -o/--output: a format among allowed.
type outputFlag struct {
	value   string
	allowed []string
}

// addOutputFlag adds -o/--output to cmd, accepting allowed (human output is the default).
func addOutputFlag(cmd *cobra.Command, human string, allowed ...string) *outputFlag {
	o := &outputFlag{allowed: allowed}
	cmd.Flags().StringVarP(&o.value, "output", "o", "", fmt.Sprintf("output format: %s (default: %s)", strings.Join(allowed, "|"), human))
	return o
}

// format returns the chosen format, or a usage error naming the allowed ones. A value that looks
// like a file name gets a hint: files are written with --out-file.
func (o *outputFlag) format() (string, error) {
	if o.value == formatHuman {
		return formatHuman, nil
	}
	for _, a := range o.allowed {
		if o.value == a {
			return a, nil
		}
	}
	hint := ""
	if strings.ContainsAny(o.value, "./") {
		hint = "; -o is an output format, write a file with --out-file"
	}
	return "", usagef("-o/--output: unknown format %q (want %s)%s", o.value, strings.Join(o.allowed, "|"), hint)
}

// writeYAML prints v as YAML (through its JSON encoding, so field names are the JSON ones).
func writeYAML(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// writeStructured prints v as JSON or YAML; it reports whether format was one of the two.
func writeStructured(w io.Writer, format string, v any) (bool, error) {
	switch format {
	case formatJSON:
		return true, writeJSON(w, v)
	case formatYAML:
		return true, writeYAML(w, v)
	}
	return false, nil
}
