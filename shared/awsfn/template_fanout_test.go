package awsfn_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestTemplateFanout checks the compaction queue wiring of template.yaml:
// the compactor's SQS event source mapping (partial batch responses,
// MaximumConcurrency from its parameter), the queue's visibility against
// the compactor's longest timeout and its DLQ, the compactor's environment,
// the notification path (bucket -> EventBridge rule on .manifest keys under
// the warehouse prefix -> the queue, allowed by the queue policy for that
// rule only), and that the new resources stay in their block.
func TestTemplateFanout(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	res := path(doc.Content[0], "Resources")
	params := path(doc.Content[0], "Parameters")
	m := path(res, "CompactorJobs", "Properties")
	if child(path(res, "CompactorJobs"), "Type").Value != "AWS::Lambda::EventSourceMapping" ||
		render(child(m, "EventSourceArn")) != "GetAtt:CompactionQueue.Arn" || render(child(m, "FunctionName")) != "Ref:CompactorFunction" ||
		render(child(m, "FunctionResponseTypes")) != "[ReportBatchItemFailures]" ||
		render(path(m, "ScalingConfig", "MaximumConcurrency")) != "Ref:CompactionMaxConcurrency" ||
		render(child(m, "BatchSize")) != "Ref:CompactionBatchSize" {
		t.Errorf("compactor SQS mapping: %s", render(m))
	}
	if v := path(params, "CompactionMaxConcurrency", "MinValue"); v == nil || v.Value != "2" {
		t.Errorf("CompactionMaxConcurrency MinValue %v, want 2 (SQS's minimum)", v)
	}
	maxTimeout, _ := strconv.Atoi(path(params, "CompactorTimeout", "MaxValue").Value)
	q := path(res, "CompactionQueue", "Properties")
	if vis, _ := strconv.Atoi(child(q, "VisibilityTimeout").Value); vis < 6*maxTimeout {
		t.Errorf("compaction queue visibility %d s < 6 x the compactor's longest timeout %d s", vis, maxTimeout)
	}
	if render(path(q, "RedrivePolicy", "deadLetterTargetArn")) != "GetAtt:CompactionDeadLetterQueue.Arn" {
		t.Errorf("compaction queue DLQ: %s", render(child(q, "RedrivePolicy")))
	}
	env := path(res, "CompactorFunction", "Properties", "Environment", "Variables")
	if render(child(env, "TABLEKEEP_COMPACTION_QUEUE_URL")) != "Ref:CompactionQueue" || render(child(env, "TABLEKEEP_INLINE_TABLES")) != "Ref:InlineTables" ||
		render(child(env, "TABLEKEEP_INLINE_TIME")) != "Ref:InlineTime" ||
		render(child(env, "TABLEKEEP_SAFETY_SCAN_EVERY")) != "If:[NotificationsOn,Ref:SafetyScanEvery,0]" {
		t.Errorf("compactor environment: %s", render(env))
	}
	if nc := render(path(res, "WarehouseBucket", "Properties", "NotificationConfiguration")); nc != "If:[NotificationsOn,{EventBridgeConfiguration={EventBridgeEnabled=true}},Ref:AWS::NoValue]" {
		t.Errorf("bucket notifications: %s", nc)
	}
	rule := path(res, "ManifestEventRule", "Properties")
	pat := render(child(rule, "EventPattern"))
	for _, want := range []string{"source=[aws.s3]", "detail-type=[Object Created]", "key=[{wildcard=Sub:${WarehousePrefix}/*.manifest}]"} {
		if !strings.Contains(pat, want) {
			t.Errorf("manifest rule pattern %s lacks %s", pat, want)
		}
	}
	if render(path(rule, "Targets")) != "[{Id=compaction-queue,Arn=GetAtt:CompactionQueue.Arn}]" {
		t.Errorf("manifest rule targets %s", render(path(rule, "Targets")))
	}
	pol := render(path(res, "CompactionQueuePolicy", "Properties", "PolicyDocument", "Statement"))
	if !strings.Contains(pol, "Principal={Service=events.amazonaws.com},Action=sqs:SendMessage,Resource=GetAtt:CompactionQueue.Arn,Condition={ArnEquals={aws:SourceArn=GetAtt:ManifestEventRule.Arn}}") {
		t.Errorf("queue policy does not limit EventBridge to the manifest rule: %s", pol)
	}
	// One block at the end of Resources, after the marker comment.
	text := string(b)
	i := strings.Index(text, "# --- fleet fan-out and notifications (issue 11) ---")
	if i < 0 {
		t.Fatal("no fan-out block marker")
	}
	for _, name := range []string{"CompactionDeadLetterQueue", "CompactionQueue", "CompactionQueuePolicy", "ManifestEventRule",
		"CompactorFanoutPolicy", "CompactorJobs", "CompactionDeadLetterAlarm"} {
		if j := strings.Index(text, "\n  "+name+":\n"); j < i {
			t.Errorf("%s is not in the fan-out block", name)
		}
	}
}
