package fault

import (
	"fmt"
	"strings"
)

// FieldError is one bad field of a request: the field as the config file
// and the admin API spell it, and its problem.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// FieldErrors are the bad fields of one request or declaration. Invalid
// turns them into the one error it is answered with; the admin API lists
// them one by one (errors.As finds them as the Invalid error's cause).
type FieldErrors []FieldError

// Add records a bad field.
func (fe *FieldErrors) Add(field, format string, args ...any) {
	*fe = append(*fe, FieldError{Field: field, Message: fmt.Sprintf(format, args...)})
}

// Error lists the fields and their problems.
func (fe FieldErrors) Error() string {
	msgs := make([]string, len(fe))
	for i, e := range fe {
		msgs[i] = e.Field + ": " + e.Message
	}
	return strings.Join(msgs, "; ")
}

// Invalid returns an Invalid error naming every bad field (nil when there
// is none): Field lists them comma separated and the message names each
// with its problem.
func (fe FieldErrors) Invalid() error {
	if len(fe) == 0 {
		return nil
	}
	fields := make([]string, len(fe))
	for i, e := range fe {
		fields[i] = e.Field
	}
	return &Error{Kind: Invalid, Code: "invalid", Message: fe.Error(), Field: strings.Join(fields, ","), Cause: fe}
}

// StaleIfMatch is the Conflict of an If-Match that names another
// generation of record than the stored one, have (0 when the record does
// not exist).
func StaleIfMatch(record string, want, have uint64) error {
	msg := fmt.Sprintf("If-Match %d is stale: the %s is at generation %d", want, record, have)
	if have == 0 {
		msg = "If-Match names a generation but the " + record + " does not exist"
	}
	return New(Conflict, "conflict", msg).WithField("If-Match").WithHint("read the " + record + " again and retry with its ETag")
}
