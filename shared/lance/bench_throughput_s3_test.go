package lance_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/tablekeep/tablekeep/shared/internal/faultproxy"
	"github.com/tablekeep/tablekeep/shared/internal/testenv"
	"github.com/tablekeep/tablekeep/shared/objstore"
	"github.com/tablekeep/tablekeep/shared/table"
)

// The markers of docs/benchmarks.md's LanceDB throughput section (the same
// strings as shared/bench.LanceThroughputBegin/End).
const (
	throughputBegin = "<!-- lance-throughput-bench: begin -->"
	throughputEnd   = "<!-- lance-throughput-bench: end -->"
)

// BenchmarkUpsertThroughputS3: one-row upserts, one writer, tablekeep
// (format 3, the default, and format 2) against LanceDB's mergeInsert
// (@lancedb/lancedb from testdata/lancedb, its own S3 client), in one run,
// both against versitygw behind the fault proxy with S3's latency per
// request (GET 20 ms, PUT 30, LIST 40, HEAD 20). LANCE_THROUGHPUT_UPSERTS
// sets the count (default 100); LANCE_THROUGHPUT_DOC, if set, is the file
// (docs/benchmarks.md) whose marked section gets the table. Needs the
// local stack (make bench-lance-throughput starts one).
func BenchmarkUpsertThroughputS3(b *testing.B) {
	n := 100
	if s := os.Getenv("LANCE_THROUGHPUT_UPSERTS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	ctx := context.Background()
	direct := testenv.S3Store(b)
	bucket := direct.Bucket()
	s3p := objstore.S3Profile()
	proxy, err := faultproxy.Start(testenv.S3Endpoint(b), faultproxy.Options{Delay: func(r *http.Request) time.Duration {
		if r.Method == http.MethodDelete {
			return s3p.Put
		}
		return s3p.For(faultproxy.S3Kind(r))
	}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { proxy.Close() })
	st, err := faultproxy.NewS3(ctx, proxy.URL(), bucket)
	if err != nil {
		b.Fatal(err)
	}
	run := fmt.Sprintf("tp%d", time.Now().UnixNano())
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "name", Type: arrow.BinaryTypes.String}}, nil)
	batch := func(id int64, name string) arrow.RecordBatch {
		bl := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		defer bl.Release()
		bl.Field(0).(*array.Int64Builder).Append(id)
		bl.Field(1).(*array.StringBuilder).Append(name)
		return bl.NewRecordBatch()
	}
	rows := []string{
		fmt.Sprintf("%d one-row upserts by one writer (half of an existing key, half of a new one), each store behind the fault proxy with S3's latency (GET 20 ms, HEAD 20, PUT 30, LIST 40) on versitygw; LanceDB %s through its own S3 client, tablekeep through `objstore.S3`; measured in one run:", n, "`mergeInsert(\"id\").whenMatchedUpdateAll().whenNotMatchedInsertAll()`"),
		"",
		"| writer | per upsert | upserts/s | requests per upsert (proxy) |",
		"| --- | --- | --- | --- |",
	}
	for _, format := range []uint64{3, 2} {
		cnt := objstore.NewCounting(st)
		tb, err := table.Create(ctx, cnt, fmt.Sprintf("%s/tk%d", run, format), schema, "id", table.Options{Format: format})
		if err != nil {
			b.Fatal(err)
		}
		for i := range int64(10) { // as LanceDB's table starts: 10 rows
			rec := batch(i, "seed")
			_, err := tb.Upsert(ctx, rec)
			rec.Release()
			if err != nil {
				b.Fatal(err)
			}
		}
		s0, c0 := proxy.Stats(), cnt.Counts()
		start := time.Now()
		for g := 1; g <= n; g++ {
			id := int64(10 + g)
			if g%2 == 0 {
				id = int64(g % 10)
			}
			rec := batch(id, fmt.Sprint("gen", g))
			_, err := tb.Upsert(ctx, rec)
			rec.Release()
			if err != nil {
				b.Fatal(err)
			}
		}
		el := time.Since(start)
		s1, c1 := proxy.Stats(), cnt.Counts().Sub(c0)
		per := el / time.Duration(n)
		rows = append(rows, fmt.Sprintf("| tablekeep, format %d, warm handle | %s | %.1f | %.2f (%s) |", format, per.Round(10*time.Microsecond), float64(n)/el.Seconds(),
			float64(s1.Requests-s0.Requests)/float64(n), perKind(c1, n)))
		b.ReportMetric(float64(per)/1e6, fmt.Sprintf("ms/upsert-tk%d", format))
	}
	opts, _ := json.Marshal(map[string]string{
		"aws_access_key_id": os.Getenv("AWS_ACCESS_KEY_ID"), "aws_secret_access_key": os.Getenv("AWS_SECRET_ACCESS_KEY"),
		"aws_endpoint": proxy.URL(), "aws_region": "us-east-1", "allow_http": "true",
	})
	var lr struct {
		Latest int     `json:"latest"`
		MS     float64 `json:"ms"`
	}
	s0 := proxy.Stats()
	// churn: a 10-row table with a btree index on id (versions 1-2), then
	// one-row mergeInserts until the table has 2+n versions.
	nodeEnv(b, []string{"LANCE_STORAGE_OPTIONS=" + string(opts)}, &lr, "churn", "s3://"+bucket+"/"+run+"/lance", "t", strconv.Itoa(2+n))
	s1 := proxy.Stats()
	ups := max(lr.Latest-2, 1)
	per := time.Duration(lr.MS * float64(time.Millisecond) / float64(ups))
	rows = append(rows, fmt.Sprintf("| LanceDB mergeInsert | %s | %.1f | %.2f (create and index included) |", per.Round(10*time.Microsecond), 1000*float64(ups)/lr.MS,
		float64(s1.Requests-s0.Requests)/float64(ups)))
	b.ReportMetric(float64(per)/1e6, "ms/upsert-lancedb")
	rows = append(rows, "", "Earlier, on local disk only (no latency): tablekeep 0.87 ms, LanceDB 44 ms per upsert. `make bench-lance-throughput` (`BenchmarkUpsertThroughputS3`, shared/lance) writes this section; it starts its own stack.")
	for _, r := range rows {
		b.Log(r)
	}
	if doc := os.Getenv("LANCE_THROUGHPUT_DOC"); doc != "" {
		if err := spliceMarked(doc, throughputBegin, throughputEnd, strings.Join(rows, "\n")+"\n"); err != nil {
			b.Fatal(err)
		}
	}
}

func perKind(c objstore.Counts, n int) string {
	var parts []string
	for _, k := range []struct {
		name string
		v    int64
	}{{"LIST", c.List}, {"GET", c.Get}, {"HEAD", c.Head}, {"PUT", c.Put}} {
		if k.v > 0 {
			parts = append(parts, fmt.Sprintf("%s %.2f", k.name, float64(k.v)/float64(n)))
		}
	}
	return strings.Join(parts, ", ")
}
