package maintenance

import "fmt"

// Outcome is what became of one table in a maintenance run. Callers decide
// on it (and read TableReport.Error), never on the text of Skipped.
type Outcome uint8

// The outcomes of a table's maintenance.
const (
	// Maintained: the maintenance ran (in a dry run, was planned).
	// Compaction alone may have failed (TableReport.CompactionError), the
	// table was pruned.
	Maintained Outcome = iota
	// Busy: another holder had the table's lock; nothing was done
	// (Skipped says so).
	Busy
	// Failed: the maintenance failed; TableReport.Error says why.
	Failed
)

// String is the outcome's name: maintained, busy or failed.
func (o Outcome) String() string {
	switch o {
	case Maintained:
		return "maintained"
	case Busy:
		return "busy"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// failedNote is the prefix of Skipped for a failed table (the note printed
// and written to JSON, "error: <why>", as before Outcome existed).
const failedNote = "error: "

// Fail records that the table's maintenance failed with err: Outcome
// Failed, Error err's text, and Skipped "error: " and that text.
func (tr *TableReport) Fail(err error) {
	tr.Outcome, tr.Error = Failed, err.Error()
	tr.Skipped = failedNote + tr.Error
}

// busy records that another holder had the table's lock.
func (tr *TableReport) busy() {
	tr.Outcome, tr.Skipped = Busy, "locked by another compactor"
}
