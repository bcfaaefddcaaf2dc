// Command tablekeep is the one bootstrap all three tablekeep Lambda
// functions run (provided.al2023, built as bootstrap with -tags
// lambda.norpc): TABLEKEEP_FUNCTION (compactor, cleaner or sweeper, set per
// function by template.yaml) picks the role, so `sam build` builds it once.
// All logic is in shared/awsfn.
//
// Floor 8 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). A thin main over
// shared/awsfn.MainFromEnv. What it links is what every cold start loads: no
// YAML parser, no template reader (TestBootstrapImportsNoYAML). It must not
// import: shared/iampolicy, shared/cli, shared/embedded, shared/bench.
package main
