// Command cleaner is the tablekeep cleaner Lambda function (provided.al2023,
// built as bootstrap with -tags lambda.norpc). All logic is in shared/awsfn.
package main

import "github.com/tablekeep/tablekeep/shared/awsfn"

func main() { awsfn.Main(awsfn.RoleCleaner) }
