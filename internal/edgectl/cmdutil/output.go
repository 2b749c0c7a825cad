package cmdutil

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/edgesched/edgesched/internal/cli"
	"github.com/edgesched/edgesched/quant"
)

// outputFormats are the values of -o/--output, the default first.
var outputFormats = []string{"table", "json", "yaml"}

// CheckOutput validates an -o/--output value.
func CheckOutput(v string) error {
	if slices.Contains(outputFormats, v) {
		return nil
	}
	return cli.UnknownValue("-o/--output", v, outputFormats)
}

// AddOutputFlag registers -o/--output (default table) on cmd, with its
// values for shell completion. Every command that prints data has it.
func AddOutputFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVarP(p, "output", "o", "table", "output format: table, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", Complete(Fixed(outputFormats...), false))
}

// AddModelKeysFlag registers --model-keys (the trusted model-signing
// public keys: files or directories of *.pub) with the purpose for the
// help, and --keys, its deprecated name (docs/cli.md, "One name per
// concept").
func AddModelKeysFlag(fl *pflag.FlagSet, p *[]string, purpose string) {
	sep := " "
	if strings.HasPrefix(purpose, ";") {
		sep = ""
	}
	fl.StringSliceVar(p, "model-keys", nil, "trusted model-signing public keys (files or directories of *.pub, comma-separated or repeated)"+sep+purpose)
	cli.DeprecatedAlias(fl, "keys", "model-keys")
}

// AddOutFileFlag registers --out, the file a command writes, with its
// former shorthand -o deprecated: -o is the output format everywhere
// else.
func AddOutFileFlag(fl *pflag.FlagSet, p *string, usage string) {
	fl.StringVarP(p, "out", "o", "", usage)
	cli.DeprecatedShorthand(fl, "out")
}

// PrintData writes v as the format asks: indented JSON, YAML of the same
// document (sigs.k8s.io/yaml encodes through encoding/json, so the keys,
// omitted fields and values are the JSON's), or, for table, whatever
// table writes. The JSON convention (docs/cli.md): snake_case keys, unset
// values omitted or null.
func PrintData(w io.Writer, format string, v any, table func(io.Writer) error) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return fmt.Errorf("encode yaml: %w", err)
		}
		_, err = w.Write(b)
		return err
	case "table", "":
		return table(w)
	}
	return CheckOutput(format)
}

// ShortOrDash abbreviates a model ID for a table or a line
// (quant.ShortID), "-" for none.
func ShortOrDash(id string) string {
	if id == "" {
		return "-"
	}
	return quant.ShortID(id)
}
