package activation

import (
	"errors"
	"fmt"
)

// ErrStage is matched by every *StageError.
var ErrStage = errors.New("activation stage refused")

// StageError is the outcome of a stage that did not pass. Reason becomes the condition and event
// reason; Message is safe to show (no secrets, URL userinfo or query, or server prose).
type StageError struct {
	// Condition is the stage condition type the error belongs to.
	Condition string
	// Reason is the CamelCase reason.
	Reason string
	// Message is the sanitized human-readable explanation.
	Message string
	// Transient marks failures that are retried (Reconciling) rather than needing a human
	// (Stalled).
	Transient bool
	// Waiting marks a refusal that another object can remove (a trust source naming the
	// signer, a key Secret, a grant that may still arrive in the same apply): it reads
	// Reconciling, and is re-verified as soon as such an object arrives, until the manager's
	// wait grace period has passed since the object started waiting; then it reads Stalled.
	// Never set together with Transient.
	Waiting bool
	// Err is the underlying cause, for logs and errors.Is; never shown in conditions.
	Err error
}

func (e *StageError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.Condition, e.Reason, e.Message)
}

// Unwrap returns ErrStage and the cause.
func (e *StageError) Unwrap() []error {
	if e.Err == nil {
		return []error{ErrStage}
	}
	return []error{ErrStage, e.Err}
}

// Refuse is the outcome of a stage that needs a human: not retried.
func Refuse(condition, reason, format string, args ...any) *StageError {
	return &StageError{Condition: condition, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Wait is the outcome of a stage refused until another object arrives (see StageError.Waiting).
func Wait(condition, reason, format string, args ...any) *StageError {
	return &StageError{Condition: condition, Reason: reason, Message: fmt.Sprintf(format, args...), Waiting: true}
}

// Retry is the outcome of a stage that failed transiently: retried (Reconciling).
func Retry(condition, reason string, err error, format string, args ...any) *StageError {
	return &StageError{Condition: condition, Reason: reason, Message: fmt.Sprintf(format, args...), Transient: true, Err: err}
}
