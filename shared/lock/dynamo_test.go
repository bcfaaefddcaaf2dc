package lock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tablekeep/tablekeep/shared/clock"
	"github.com/tablekeep/tablekeep/shared/internal/testkit"
)

// lockTable creates a fresh lock table, so reruns against one moto start from
// empty items.
func lockTable(t *testing.T, client *dynamodb.Client) string {
	t.Helper()
	var rnd [4]byte
	rand.Read(rnd[:])
	table := "tablekeep-locks-" + hex.EncodeToString(rnd[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := CreateLockTable(ctx, client, table); err != nil {
		t.Fatalf("%v (is moto_server at TABLEKEEP_AWS_ENDPOINT?)", err)
	}
	return table
}

func TestDynamoLocker(t *testing.T) {
	client := testkit.DynamoClient(t)
	table := lockTable(t, client)
	if err := CreateLockTable(context.Background(), client, table); err != nil {
		t.Errorf("CreateLockTable on an existing table: %v", err)
	}
	ttl, err := client.DescribeTimeToLive(context.Background(), &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(table)})
	if err != nil || ttl.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(ttl.TimeToLiveDescription.AttributeName) != "ttl" {
		t.Errorf("TTL not enabled on %q: %+v %v", table, ttl, err)
	}
	testLocker(t, func(t *testing.T) store {
		// One table, lock names prefixed per subtest.
		prefix := t.Name() + "/"
		return func(clock clock.Clock) Locker {
			return prefixed{NewDynamoLocker(client, table, clock), prefix}
		}
	})
}

// prefixed maps lock names into one namespace so subtests can share a table.
type prefixed struct {
	Locker
	prefix string
}

func (p prefixed) Acquire(ctx context.Context, name string, opts AcquireOptions) (*Lease, error) {
	l, err := p.Locker.Acquire(ctx, p.prefix+name, opts)
	if l != nil {
		l.Name = name
	}
	return l, err
}

func (p prefixed) wrap(l *Lease) *Lease {
	c := *l
	c.Name = p.prefix + c.Name
	return &c
}

func (p prefixed) Renew(ctx context.Context, l *Lease) (*Lease, error) {
	n, err := p.Locker.Renew(ctx, p.wrap(l))
	if n != nil {
		n.Name = l.Name
	}
	return n, err
}

func (p prefixed) Release(ctx context.Context, l *Lease) error {
	return p.Locker.Release(ctx, p.wrap(l))
}

func (p prefixed) Check(ctx context.Context, l *Lease) error {
	return p.Locker.Check(ctx, p.wrap(l))
}

// The stored item has the documented shape, and a released lock keeps its
// token but loses its owner and records the token released.
func TestDynamoLockerItem(t *testing.T) {
	ctx := context.Background()
	client := testkit.DynamoClient(t)
	table := lockTable(t, client)
	clock := newFakeClock()
	lk := NewDynamoLocker(client, table, clock)
	l := mustAcquire(t, lk, "tables/a", AcquireOptions{Owner: "me", Lease: time.Minute})
	item := getItem(t, client, table, "tables/a")
	want := map[string]string{
		"name": "S:tables/a", "owner": "S:me", "token": "N:1",
		"expires_at": "N:" + itoa(clock.Now().Add(time.Minute).UnixMilli()),
		"ttl":        "N:" + itoa(clock.Now().Add(time.Minute+DynamoTTLAfterExpiry).Unix()),
		"op":         "nonce",
	}
	if got := describe(item); !equalMaps(nonces(got), want) {
		t.Errorf("item %v, want %v", got, want)
	}
	if err := lk.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	got := describe(getItem(t, client, table, "tables/a"))
	want = map[string]string{
		"name": "S:tables/a", "token": "N:1", "expires_at": "N:0",
		"ttl": "N:" + itoa(clock.Now().Add(DynamoTTLAfterExpiry).Unix()),
		"op":  "nonce", "released": "N:1", "released_op": "nonce",
	}
	if !equalMaps(nonces(got), want) || got["op"] != describe(item)["op"] || got["op"] == got["released_op"] {
		t.Errorf("released item %v, want %v (op of the acquisition kept, released_op another)", got, want)
	}
	// Acquire leaves released and released_op alone.
	mustAcquire(t, lk, "tables/a", AcquireOptions{Owner: "me", Lease: time.Minute})
	if again := describe(getItem(t, client, table, "tables/a")); again["released"] != "N:1" || again["released_op"] != got["released_op"] ||
		again["owner"] != "S:me" || again["token"] != "N:2" || again["op"] == got["op"] {
		t.Errorf("re-acquired item %v", again)
	}
	// The error from a failed condition names the holder (moto returns the
	// old item with ReturnValuesOnConditionCheckFailure).
	_, err := lk.Acquire(ctx, "tables/a", AcquireOptions{Owner: "you", Lease: time.Minute, MaxWait: -1})
	var held *heldError
	if !errors.As(err, &held) || held.owner != "me" || held.token != 2 {
		t.Errorf("acquire of a held lock: %v", err)
	}
}

func getItem(t *testing.T, client *dynamodb.Client, table, name string) map[string]types.AttributeValue {
	t.Helper()
	out, err := client.GetItem(context.Background(), &dynamodb.GetItemInput{
		TableName: aws.String(table), Key: map[string]types.AttributeValue{"name": attrS(name)}, ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatal(err)
	}
	return out.Item
}

func describe(item map[string]types.AttributeValue) map[string]string {
	m := map[string]string{}
	for k, v := range item {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			m[k] = "S:" + v.Value
		case *types.AttributeValueMemberN:
			m[k] = "N:" + v.Value
		default:
			m[k] = "?"
		}
	}
	return m
}

var nonceValue = regexp.MustCompile(`^S:[0-9a-f]{16}$`)

// nonces returns a copy of a described item with the nonce attributes (op,
// released_op) replaced by "nonce" if they are 16 hex digits.
func nonces(m map[string]string) map[string]string {
	c := map[string]string{}
	for k, v := range m {
		if (k == "op" || k == "released_op") && nonceValue.MatchString(v) {
			v = "nonce"
		}
		c[k] = v
	}
	return c
}

func equalMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func itoa(n int64) string { return attrN(n).(*types.AttributeValueMemberN).Value }
