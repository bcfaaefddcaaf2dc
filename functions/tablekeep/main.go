// Command tablekeep is the one bootstrap all three tablekeep Lambda
// functions run (provided.al2023, built as bootstrap with -tags
// lambda.norpc): TABLEKEEP_FUNCTION (compactor, cleaner or sweeper, set per
// function by template.yaml) picks the role, so `sam build` builds it once.
// All logic is in shared/awsfn.
package main

import "github.com/tablekeep/tablekeep/shared/awsfn"

func main() { awsfn.MainFromEnv() }
