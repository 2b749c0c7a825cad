package federated

import (
	"errors"
	"fmt"

	"github.com/edgesched/edgesched/quant/esu"
)

// ErrWrongSubject: an update arrived on another site's subject than its
// header names (ReasonSubject): a site relaying a message it did not
// make.
var ErrWrongSubject = errors.New("federated: update on another site's subject")

// CheckedUpdate is what CheckUpdateMsg found in one update message.
type CheckedUpdate struct {
	// Msg is the verified message; Err, when set instead, says why the
	// message cannot be attributed to a site (it wraps ErrMessage,
	// ErrSiteSignature, ErrUnknownSite or ErrWrongSubject).
	Msg *UpdateMsg
	Err error
	// PayloadErr refuses the verified message's payload (it wraps
	// esu.ErrUpdate); otherwise Payload is its base model, size and L2
	// norm.
	PayloadErr error
	Payload    esu.Info
	// View is the checked payload's values as they travel (nil when it
	// was refused).
	View *esu.View
}

// CheckUpdateMsg verifies an update message that arrived on subject (""
// skips the subject binding): the envelope and its signature
// (DecodeUpdateMsg), then the payload for at most maxValues values (0:
// any) with esu.Check, without decoding its values. It holds no
// state: safe for concurrent use.
func CheckUpdateMsg(data []byte, subject string, keys SiteKeys, maxValues int) CheckedUpdate {
	m, err := DecodeUpdateMsg(data, keys)
	if err == nil && subject != "" && subject != UpdateSubjectPrefix+m.Header.Site {
		err = fmt.Errorf("%w: site %q seq %d arrived on %s", ErrWrongSubject, m.Header.Site, m.Header.Seq, subject)
	}
	if err != nil {
		return CheckedUpdate{Err: err}
	}
	c := CheckedUpdate{Msg: m}
	c.CheckPayload(maxValues)
	return c
}

// CheckPayload checks the message's payload again for at most maxValues
// values (a receiver whose expected size changed since).
func (c *CheckedUpdate) CheckPayload(maxValues int) {
	c.Payload, c.View, c.PayloadErr = esu.CheckView(c.Msg.Payload, maxValues)
}
