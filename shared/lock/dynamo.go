package lock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
	attrExpires = "expires_at" // unix milliseconds
	attrTTL     = "ttl"        // unix seconds, for DynamoDB TTL
)

// DynamoLocker keeps one DynamoDB item per lock name:
//
//	name (S, partition key), owner (S, absent once released),
//	token (N, the fencing token), expires_at (N, unix ms), ttl (N, unix s)
//
// Every change is one conditional UpdateItem. Acquire sets the owner and
// expiry and ADDs 1 to the token, on condition that the item is absent,
// released (no owner) or expired by the caller's clock; Renew and Release
// require owner and token to be the caller's. Items are never deleted by the
// locker, so tokens keep increasing across releases. Expressions stick to
// comparisons and attribute_(not_)exists, which moto implements faithfully.
type DynamoLocker struct {
	client DynamoAPI
	table  string
	clock  Clock
}

var _ Locker = (*DynamoLocker)(nil)

// NewDynamoLocker returns a locker keeping its items in table (see
// CreateLockTable).
func NewDynamoLocker(client DynamoAPI, table string, clock Clock) *DynamoLocker {
	return &DynamoLocker{client: client, table: table, clock: clock}
}

func lockAttrNames() map[string]string {
	return map[string]string{"#name": attrName, "#owner": attrOwner, "#tok": attrToken, "#exp": attrExpires, "#ttl": attrTTL}
}

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
		out, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                aws.String(d.table),
			Key:                      d.key(name),
			UpdateExpression:         aws.String("SET #owner = :owner, #exp = :exp, #ttl = :ttl ADD #tok :one"),
			ConditionExpression:      aws.String("attribute_not_exists(#name) OR attribute_not_exists(#owner) OR #exp < :now"),
			ExpressionAttributeNames: lockAttrNames(),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":owner": attrS(opts.Owner), ":exp": attrN(exp.UnixMilli()), ":ttl": ttlFor(exp),
				":one": attrN(1), ":now": attrN(now.UnixMilli()),
			},
			ReturnValues:                        types.ReturnValueAllNew,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if ccf, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok {
			if r, perr := parseRecord(ccf.Item); perr == nil && r != nil {
				return nil, r.heldError()
			}
			return nil, &heldError{name: name}
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
	_, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(d.table),
		Key:                      d.key(l.Name),
		UpdateExpression:         aws.String("SET #exp = :exp, #ttl = :ttl"),
		ConditionExpression:      aws.String("#owner = :me AND #tok = :tok"),
		ExpressionAttributeNames: map[string]string{"#owner": attrOwner, "#tok": attrToken, "#exp": attrExpires, "#ttl": attrTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":exp": attrN(exp.UnixMilli()), ":ttl": ttlFor(exp), ":me": attrS(l.Owner), ":tok": attrU(l.Token),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		return nil, d.updateError("renew", l, err)
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
	_, err := d.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(d.table),
		Key:                      d.key(l.Name),
		UpdateExpression:         aws.String("SET #exp = :zero, #ttl = :ttl REMOVE #owner"),
		ConditionExpression:      aws.String("#owner = :me AND #tok = :tok"),
		ExpressionAttributeNames: map[string]string{"#owner": attrOwner, "#tok": attrToken, "#exp": attrExpires, "#ttl": attrTTL},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":zero": attrN(0), ":ttl": ttlFor(now), ":me": attrS(l.Owner), ":tok": attrU(l.Token),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err != nil {
		return d.updateError("release", l, err)
	}
	return nil
}

func (d *DynamoLocker) updateError(op string, l *Lease, err error) error {
	if ccf, ok := errors.AsType[*types.ConditionalCheckFailedException](err); ok {
		r, _ := parseRecord(ccf.Item) // nil if moto/DynamoDB did not return it
		return fmt.Errorf("%s: %w", op, lostError(l, r))
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
