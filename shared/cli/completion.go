package cli

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/tablekeep/tablekeep/shared/warehouse"
)

// addCompletions completes flag values in the shells: -o, the formats of
// each command's --format and --table-format, and --table with a
// warehouse (--warehouse or $TABLEKEEP_WAREHOUSE): its registered names.
func addCompletions(app *App, root *cobra.Command) {
	fixed := func(vals ...string) cobra.CompletionFunc {
		return cobra.FixedCompletions(vals, cobra.ShellCompDirectiveNoFileComp)
	}
	_ = root.RegisterFlagCompletionFunc("output", fixed("table", "json", "csv"))
	_ = root.RegisterFlagCompletionFunc("table", func(cmd *cobra.Command, _ []string, _ string) ([]string, cobra.ShellCompDirective) {
		return registeredNames(app, cmd)
	})
	values := map[string]map[string][]string{
		"create":   {"table-format": {"3", "2"}},
		"register": {"table-format": {formatTablekeep, "lance"}},
		"append":   {"format": {"jsonl", "csv"}},
		"upsert":   {"format": {"jsonl", "csv"}},
		"export":   {"format": {"parquet"}},
	}
	for _, c := range root.Commands() {
		for flag, vals := range values[c.Name()] {
			_ = c.RegisterFlagCompletionFunc(flag, fixed(vals...))
		}
	}
}

// registeredNames are the names registered in the warehouse the command
// line names (--warehouse, else $TABLEKEEP_WAREHOUSE), for --table; without
// one, --table is a location: the shell completes files.
func registeredNames(app *App, cmd *cobra.Command) ([]string, cobra.ShellCompDirective) {
	uri := os.Getenv(warehouse.EnvWarehouse)
	if f := cmd.Flags().Lookup("warehouse"); f != nil && f.Value.String() != "" {
		uri = f.Value.String()
	}
	if uri == "" {
		return nil, cobra.ShellCompDirectiveDefault
	}
	ctx := cmd.Context()
	w, err := openWarehouse(ctx, app, warehouseFlags{URI: uri}, openMode{})
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	refs, err := w.Catalog.Tables(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	names := make([]string, 0, len(refs))
	for _, r := range refs {
		names = append(names, r.Name)
	}
	return names, cobra.ShellCompDirectiveNoFileComp
}
