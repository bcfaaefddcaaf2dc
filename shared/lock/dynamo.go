package lock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/tablekeep/tablekeep/shared/clock"
)

// DynamoAPI is the part of *dynamodb.Client DynamoLocker uses.
type DynamoAPI interface {
	UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// DynamoTTLAfterExpiry is how long after a lease's expiry its item's ttl
// attribute lets DynamoDB TTL delete it. A deleted item restarts the name's
// token sequence at 1; by then no lease on it can pass a fence.
const DynamoTTLAfterExpiry = 7 * 24 * time.Hour

// Attribute names of a lock item. The partition key is "name" (a string).
const (
	attrName    = "name"
	attrOwner   = "owner"
	attrToken   = "token"
	attrExpires = "expires_at"  // unix milliseconds
	attrTTL     = "ttl"         // unix seconds, for DynamoDB TTL
	attrOp      = "op"          // nonce of the last Acquire or Renew call
	attrRel     = "released"    // token of the last release
	attrRelOp   = "released_op" // nonce of the Release call that released it
)

// DynamoLocker keeps one DynamoDB item per lock name:
//
//	name (S, partition key), owner (S, absent once released),
//	token (N, the fencing token), expires_at (N, unix ms), ttl (N, unix s),
//	op (S, nonce of the last Acquire or Renew call),
//	released (N, token of the last release; absent until one),
//	released_op (S, nonce of the Release call that released it)
//
// Every change is one conditional UpdateItem. Acquire sets the owner and
// expiry and ADDs 1 to the token, on condition that the item is absent,
// released (no owner) or expired by the caller's clock; Renew and Release
// require owner and token to be the caller's. Items are never deleted by the
// locker, so tokens keep increasing across releases. Expressions stick to
// comparisons, attribute_(not_)exists and SET/REMOVE/ADD, which moto
// implements faithfully.
//
// Lost responses: when an UpdateItem was applied but its response was lost,
// the SDK retries the same input, and the retry fails its condition because
// of the first attempt's own effect. Each call therefore writes a random
// 64-bit nonce (the same in the SDK's retries of that call), and a failed
// condition returns the old item (ReturnValuesOnConditionCheckFailure
// ALL_OLD), in which the call recognises its own applied write and reports
// success: Acquire if op is its nonce (the lease is read from that item);
// Renew if owner, token and op are its own; Release if released is its token
// and released_op its nonce, whoever has acquired the lock since (Acquire
// leaves both attributes alone). Anything else is the usual ErrLockHeld or
// ErrLeaseLost; a second Release of a released lease (another call, another
// nonce) is still ErrLeaseLost.
type DynamoLocker struct {
	client DynamoAPI
	table  string
	clock  clock.Clock
}

var _ Locker = (*DynamoLocker)(nil)

// NewDynamoLocker returns a locker keeping its items in table (see
// CreateLockTable).
func NewDynamoLocker(client DynamoAPI, table string, clock clock.Clock) *DynamoLocker {
	return &DynamoLocker{client: client, table: table, clock: clock}
}

func lockAttrNames() map[string]string {
	return map[string]string{"#name": attrName, "#owner": attrOwner, "#tok": attrToken, "#exp": attrExpires, "#ttl": attrTTL, "#op": attrOp}
}

// newNonce identifies one Acquire, Renew or Release call (see DynamoLocker).
func newNonce() string { return fmt.Sprintf("%016x", rand.Uint64()) }

func attrS(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

func attrN(n int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(n, 10)}
}

func attrU(n uint64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatUint(n, 10)}
}

func (d *DynamoLocker) key(name string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrName: attrS(name)}
}

func ttlFor(expires time.Time) types.AttributeValue {
	return attrN(expires.Add(DynamoTTLAfterExpiry).Unix())
}

// Acquire implements Locker.
func (d *DynamoLocker) Acquire(ctx context.Context, name string, opts AcquireOptions) (*Lease, error) {
	return acquireLoop(ctx, d.clock, name, opts, func(now time.Time) (*Lease, error) {
		exp := expiryFor(now, opts.Lease)
		nonce := newNonce()
		out, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                aws.String(d.table),
			Key:                      d.key(name),
			UpdateExpression:         aws.String("SET #owner = :owner, #exp = :exp, #ttl = :ttl, #op = :op ADD #tok :one"),
			ConditionExpression:      aws.String("attribute_not_exists(#name) OR attribute_not_exists(#owner) OR #exp < :now"),
			ExpressionAttributeNames: lockAttrNames(),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":owner": attrS(opts.Owner), ":exp": attrN(exp.UnixMilli()), ":ttl": ttlFor(exp),
				":op": attrS(nonce), ":one": attrN(1), ":now": attrN(now.UnixMilli()),
			},
			ReturnValues:                        types.ReturnValueAllNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if ccf, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok {
			it, perr := parseItem(ccf.Item)
			if perr != nil || it == nil {
				return nil, &heldError{name: name}
			}
			if it.op == nonce && it.Owner == opts.Owner {
				// Our own acquisition, applied by an attempt whose
				// response was lost: nobody can have changed the item
				// since without replacing the nonce.
				return it.lease(opts.Lease), nil
			}
			return nil, it.heldError()
		}
		if err != nil {
			return nil, fmt.Errorf("lock %q: acquire: %w", name, err)
		}
		r, err := parseRecord(out.Attributes)
		if err != nil || r == nil || r.Owner != opts.Owner {
			return nil, fmt.Errorf("lock %q: acquire: unexpected item %v: %v", name, out.Attributes, err)
		}
		return r.lease(opts.Lease), nil
	})
}

// Renew implements Locker.
func (d *DynamoLocker) Renew(ctx context.Context, l *Lease) (*Lease, error) {
	if err := l.validate(); err != nil {
		return nil, err
	}
	exp := expiryFor(d.clock.Now(), l.Duration)
	nonce := newNonce()
	_, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(d.table),
		Key:                      d.key(l.Name),
		UpdateExpression:         aws.String("SET #exp = :exp, #ttl = :ttl, #op = :op"),
		ConditionExpression:      aws.String("#owner = :me AND #tok = :tok"),
		ExpressionAttributeNames: map[string]string{"#owner": attrOwner, "#tok": attrToken, "#exp": attrExpires, "#ttl": attrTTL, "#op": attrOp},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":exp": attrN(exp.UnixMilli()), ":ttl": ttlFor(exp), ":op": attrS(nonce), ":me": attrS(l.Owner), ":tok": attrU(l.Token),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		// A retry of an applied Renew normally passes its condition again
		// (Renew changes neither owner nor token) and re-applies the same
		// expiry; a failed condition is ours only if the old item is.
		return nil, d.updateError("renew", l, err, func(it *dynamoItem) bool {
			return it.op == nonce && it.Owner == l.Owner && it.Token == l.Token
		})
	}
	next := *l
	next.Expires = exp
	return &next, nil
}

// Release implements Locker. The item stays, without an owner, so the next
// acquisition continues the token sequence.
func (d *DynamoLocker) Release(ctx context.Context, l *Lease) error {
	if err := l.validate(); err != nil {
		return err
	}
	now := d.clock.Now()
	nonce := newNonce()
	_, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(d.table),
		Key:              d.key(l.Name),
		UpdateExpression: aws.String("SET #exp = :zero, #ttl = :ttl, #rel = :tok, #relop = :op REMOVE #owner"),
		// The condition is on owner and token only: released and
		// released_op are not read by it.
		ConditionExpression: aws.String("#owner = :me AND #tok = :tok"),
		ExpressionAttributeNames: map[string]string{
			"#owner": attrOwner, "#tok": attrToken, "#exp": attrExpires, "#ttl": attrTTL, "#rel": attrRel, "#relop": attrRelOp,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":zero": attrN(0), ":ttl": ttlFor(now), ":op": attrS(nonce), ":me": attrS(l.Owner), ":tok": attrU(l.Token),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		// Our release applied, its response lost: the retry finds the
		// lock released (or acquired since by somebody else), with our
		// token and nonce in released and released_op.
		return d.updateError("release", l, err, func(it *dynamoItem) bool {
			return it.hasReleased && it.released == l.Token && it.releasedOp == nonce
		})
	}
	return nil
}

// updateError turns a failed Renew or Release into its error, or into nil
// if the condition failed on an item that ours says this call's own write
// was applied (by an attempt whose response was lost).
func (d *DynamoLocker) updateError(op string, l *Lease, err error, ours func(*dynamoItem) bool) error {
	if ccf, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok {
		it, _ := parseItem(ccf.Item) // nil if moto/DynamoDB did not return it
		if it == nil {
			return fmt.Errorf("%s: %w", op, lostError(l, nil))
		}
		if ours(it) {
			return nil
		}
		return fmt.Errorf("%s: %w", op, lostError(l, &it.record))
	}
	return fmt.Errorf("%v: %s: %w", l, op, err)
}

// Check implements Locker with one strongly consistent GetItem.
func (d *DynamoLocker) Check(ctx context.Context, l *Lease) error {
	if err := l.validate(); err != nil {
		return err
	}
	out, err := d.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(d.table),
		Key:            d.key(l.Name),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("%v: check: %w", l, err)
	}
	r, err := parseRecord(out.Item)
	if err != nil {
		return fmt.Errorf("%v: check: %w", l, err)
	}
	return r.check(l, d.clock.Now())
}

// dynamoItem is a lock item: the record plus the attributes that let a call
// recognise its own applied write.
type dynamoItem struct {
	record
	op          string
	released    uint64
	hasReleased bool
	releasedOp  string
}

// parseItem decodes a lock item; nil for an empty one.
func parseItem(item map[string]types.AttributeValue) (*dynamoItem, error) {
	r, err := parseRecord(item)
	if err != nil || r == nil {
		return nil, err
	}
	it := &dynamoItem{record: *r}
	if v, ok := item[attrOp].(*types.AttributeValueMemberS); ok {
		it.op = v.Value
	}
	if v, ok := item[attrRelOp].(*types.AttributeValueMemberS); ok {
		it.releasedOp = v.Value
	}
	if v, ok := item[attrRel].(*types.AttributeValueMemberN); ok {
		rel, err := strconv.ParseUint(v.Value, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("lock item: attribute %q: %w", attrRel, err)
		}
		it.released, it.hasReleased = rel, true
	}
	return it, nil
}

// parseRecord decodes a lock item; nil for an empty one.
func parseRecord(item map[string]types.AttributeValue) (*record, error) {
	if len(item) == 0 {
		return nil, nil
	}
	var r record
	var err error
	str := func(k string) string {
		if v, ok := item[k].(*types.AttributeValueMemberS); ok {
			return v.Value
		}
		return ""
	}
	num := func(k string) string {
		if v, ok := item[k].(*types.AttributeValueMemberN); ok {
			return v.Value
		}
		err = errors.Join(err, fmt.Errorf("lock item: attribute %q missing or not a number", k))
		return "0"
	}
	r.Name, r.Owner = str(attrName), str(attrOwner)
	tok, terr := strconv.ParseUint(num(attrToken), 10, 64)
	exp, eerr := strconv.ParseInt(num(attrExpires), 10, 64)
	if err = errors.Join(err, terr, eerr); err != nil {
		return nil, err
	}
	r.Token, r.Expires = tok, exp
	return &r, nil
}

// DynamoTableAPI is the part of *dynamodb.Client CreateLockTable uses.
type DynamoTableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// CreateLockTable creates a lock table (partition key "name" string,
// on-demand billing), waits for it to become active and enables TTL on the
// "ttl" attribute. An existing table is accepted as is (for tests and
// bootstrap scripts; production tables belong in the infrastructure template).
func CreateLockTable(ctx context.Context, client DynamoTableAPI, table string) error {
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(attrName), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(attrName), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if _, exists := errors.AsType[*types.ResourceInUseException](err); exists {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock table %q: create: %w", table, err)
	}
	w := dynamodb.NewTableExistsWaiter(client, func(o *dynamodb.TableExistsWaiterOptions) {
		o.MinDelay, o.MaxDelay = time.Second, 5*time.Second
	})
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}, 5*time.Minute); err != nil {
		return fmt.Errorf("lock table %q: wait until active: %w", table, err)
	}
	_, err = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attrTTL), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("lock table %q: enable TTL: %w", table, err)
	}
	return nil
}
