// Package awshttp holds the HTTP client tablekeep gives the AWS SDK for the
// JSON-protocol services it calls with small bodies (DynamoDB, SQS).
//
// Why: smithy-go wraps each request body in a reader that its client
// handler closes as soon as net/http returns the response, and whose
// WriteTo then answers io.EOF as an error. When the response arrives while
// net/http's write loop is still finishing the request (the server has the
// bytes it needs; a loaded machine deschedules the writer), the write loop
// fails with that EOF and closes the connection under the response being
// read. The SDK sees "use of closed network connection" (and logs "response
// did not match expected checksum, X, 0": zero bytes were read), treats it
// as a transport error and resends a request the server has already
// applied. Seen on the local stack under load in 3 of 5 CI runs (a lock's
// UpdateItem applied twice); observed with httptrace (WroteRequest reports
// EOF) and gone with the bodies below. Every lock operation also recognises
// its own applied write (shared/lock), since on AWS a response can be lost
// for other reasons too.
//
// Floor 0 of the layering (a package's floor is one above the highest floor
// it imports; floor 0 imports no tablekeep package). It owns one function,
// Config, that every DynamoDB and SQS client of tablekeep (functions, CLI,
// tests) is built with. It must not import any tablekeep package.
package awshttp
