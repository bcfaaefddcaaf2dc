package main

import "github.com/tablekeep/tablekeep/shared/awsfn"

func main() { awsfn.MainFromEnv() }
