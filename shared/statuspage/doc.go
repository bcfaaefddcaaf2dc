// Package statuspage renders the warehouse status page: one self-contained
// HTML file (inline CSS and inline SVG sparklines, no script, no font, no
// network) showing the fleet's health at a glance and, per table, its
// backlog, its last run and its history from _stats. `tablekeep status
// --html` (shared/cli) and the scheduled compactor (shared/awsfn, into
// _status/index.html) fill a Page from what they read and call Write.
//
// Floor 0 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns the page's
// model, its layout, the bound on its size (MaxDetail tables in detail, the
// rest counted) and the escaping (html/template); what a table's health is
// is its callers'. It must not import any tablekeep package.
package statuspage
