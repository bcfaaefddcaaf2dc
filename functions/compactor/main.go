// Command compactor is the tablekeep compactor Lambda function (provided.al2023,
// built as bootstrap with -tags lambda.norpc). All logic is in shared/awsfn.
package main

import "github.com/tablekeep/tablekeep/shared/awsfn"

func main() { awsfn.Main(awsfn.RoleCompactor) }
