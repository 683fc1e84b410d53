package antctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"sigs.k8s.io/yaml"

	"antrea.io/antrea/pkg/antctl/query"
)

// Output formats of -o.
const (
	outputTable = "table"
	outputJSON  = "json"
	outputYAML  = "yaml"
)

var outputFormats = []string{outputTable, outputJSON, outputYAML}

func checkOutput(format string) error {
	for _, f := range outputFormats {
		if format == f {
			return nil
		}
	}
	return fmt.Errorf("unknown output format %q%s; want one of %s", format, didYouMean(format, outputFormats),
		strings.Join(outputFormats, ", "))
}

// table is what a get prints with -o table: a header and rows of cells.
type table struct {
	header []string
	rows   [][]string
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

// write prints the table as kubectl does, columns three spaces apart; an
// empty cell prints as "-" so that splitting a line on blanks keeps columns.
func (t *table) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	line := func(cells []string) {
		for i, c := range cells {
			if c == "" {
				c = "-"
			}
			if i > 0 {
				fmt.Fprint(tw, "\t")
			}
			fmt.Fprint(tw, c)
		}
		fmt.Fprint(tw, "\n")
	}
	line(t.header)
	for _, r := range t.rows {
		line(r)
	}
	return tw.Flush()
}

// writeObject prints v as JSON (indented) or YAML, through its json tags in
// both cases, so -o json and -o yaml show the same fields.
func writeObject(w io.Writer, format string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding output: %w", err)
	}
	if format == outputYAML {
		if b, err = yaml.JSONToYAML(b); err != nil {
			return fmt.Errorf("encoding output: %w", err)
		}
		_, err = w.Write(b)
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// joinFew joins the first n items and says how many more there are
// (query.JoinFew).
func joinFew(items []string, n int) string { return query.JoinFew(items, n) }
