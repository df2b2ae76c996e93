package activation

import (
	"errors"
	"fmt"
)

// ErrStage is matched by every *StageError.
var ErrStage = errors.New("activation stage refused")

// StageError is the outcome of a stage that did not pass: one of the outcomes the activation
// table declares (an Outcome the stage decided, or a ruleset's classification of a library
// error), with a message safe to show (no secrets, URL userinfo or query, or server prose). Only
// this package builds one, so every StageError a stage returns is in its row of the table.
type StageError struct {
	outcome Outcome
	message string
	// err is the underlying cause, for logs and errors.Is; never shown in conditions.
	err error
}

// Condition is the stage condition type the outcome belongs to.
func (e *StageError) Condition() string { return e.outcome.condition }

// Reason is the CamelCase reason: the condition and event reason.
func (e *StageError) Reason() string { return e.outcome.reason }

// Message is the sanitized human-readable explanation.
func (e *StageError) Message() string { return e.message }

// Transient reports a failure that is retried (Reconciling) rather than needing a human
// (Stalled).
func (e *StageError) Transient() bool { return e.outcome.transient }

// Waiting reports a refusal that another object can remove (a trust source naming the signer, a
// key Secret, a grant that may still arrive in the same apply): it reads Reconciling, and is
// re-verified as soon as such an object arrives, until the manager's wait grace period has passed
// since the object started waiting; then it reads Stalled. Never together with Transient.
func (e *StageError) Waiting() bool { return e.outcome.waiting }

func (e *StageError) Error() string {
	return fmt.Sprintf("%s %s: %s", e.outcome.condition, e.outcome.reason, e.message)
}

// Unwrap returns ErrStage and the cause.
func (e *StageError) Unwrap() []error {
	if e.err == nil {
		return []error{ErrStage}
	}
	return []error{ErrStage, e.err}
}

// Outcome is one outcome of a stage that the activation table declares: its condition, reason
// and class (retried, waiting or refused). The outcomes a stage decides itself are the exported
// values of table.go, each listed in its stage's row; the others come from the row's rulesets.
type Outcome struct {
	condition, reason string
	transient         bool
	// waiting: a refusal another object can remove (StageError.Waiting).
	waiting bool
}

// New returns the outcome with the message format renders.
func (o Outcome) New(format string, args ...any) *StageError {
	return &StageError{outcome: o, message: fmt.Sprintf(format, args...)}
}

// Wrap returns the outcome with the message format renders and err as its cause (for logs and
// errors.Is; never shown).
func (o Outcome) Wrap(err error, format string, args ...any) *StageError {
	return &StageError{outcome: o, message: fmt.Sprintf(format, args...), err: err}
}

// Condition is the stage condition type of the outcome.
func (o Outcome) Condition() string { return o.condition }

// Reason is the outcome's CamelCase reason.
func (o Outcome) Reason() string { return o.reason }

// class returns the outcome class of o.
func (o Outcome) class() string {
	switch {
	case o.transient:
		return classRetried
	case o.waiting:
		return classWaiting
	}
	return classRefused
}
