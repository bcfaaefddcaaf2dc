// Command bucketpolicy prints the bucket policy that grants each function
// role's access key exactly the S3 statements of its role in template.yaml
// (see shared/iampolicy). infra/aws-resources.sh puts it on the
// local warehouse bucket, whose versitygw then enforces it:
//
//	go run ./infra/bucketpolicy -bucket B -prefix warehouse \
//	    -principal compactor=KEY1 -principal cleaner=KEY2 -principal sweeper=KEY3
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/tablekeep/tablekeep/shared/awsfn"
	"github.com/tablekeep/tablekeep/shared/iampolicy"
)

type principals map[awsfn.Role]string

func (p principals) String() string { return fmt.Sprint(map[awsfn.Role]string(p)) }
func (p principals) Set(v string) error {
	role, key, ok := strings.Cut(v, "=")
	if !ok || key == "" {
		return fmt.Errorf("want role=principal, got %q", v)
	}
	p[awsfn.Role(role)] = key
	return nil
}

func main() {
	tmpl := flag.String("template", "template.yaml", "SAM template")
	bucket := flag.String("bucket", "", "warehouse bucket")
	prefix := flag.String("prefix", "warehouse", "warehouse prefix")
	pr := principals{}
	flag.Var(pr, "principal", "role=principal (access key id), once per role")
	flag.Parse()
	if err := run(*tmpl, *bucket, *prefix, pr); err != nil {
		fmt.Fprintln(os.Stderr, "bucketpolicy:", err)
		os.Exit(1)
	}
}

func run(tmpl, bucket, prefix string, pr principals) error {
	if bucket == "" {
		return fmt.Errorf("-bucket is required")
	}
	b, err := os.ReadFile(tmpl)
	if err != nil {
		return err
	}
	stmts, err := iampolicy.TemplateS3Statements(b, iampolicy.TemplateParams{Bucket: bucket, Prefix: prefix})
	if err != nil {
		return err
	}
	pol, err := iampolicy.BucketPolicy(stmts, pr)
	if err != nil {
		return err
	}
	_, err = fmt.Printf("%s\n", pol)
	return err
}
