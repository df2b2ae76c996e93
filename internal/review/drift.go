// Package review rebuilds a reviewed profile document against a candidate snapshot (Repin),
// rebuilds a candidate from an McpSnapshotReview (CandidateOf) and serves the review webhook. The
// classified, field-level diff of a drift lives in the public package drift (so that a consumer
// without Kubernetes builds the same diff); this package re-exports it under its former names.
//
// Classes only inform review. Any drift refuses activation, whatever its class: nothing here
// decides anything.
package review

import (
	"github.com/b10x/connector-mcp/drift"
	"github.com/b10x/connector-mcp/snapshot"
)

// ErrInvalidSnapshot is drift.ErrInvalidSnapshot (refusal "invalid_snapshot").
var ErrInvalidSnapshot = drift.ErrInvalidSnapshot

// RefusalInvalidSnapshot is the stable refusal name of ErrInvalidSnapshot.
const RefusalInvalidSnapshot = drift.RefusalInvalidSnapshot

// Error is a named refusal of this package (drift.Error). It never carries descriptor text.
type Error = drift.Error

// Tool change kinds (see package drift).
const (
	// KindAdded is a tool only the candidate lists.
	KindAdded = drift.KindAdded
	// KindRemoved is a tool only the reviewed snapshot lists.
	KindRemoved = drift.KindRemoved
	// KindChanged is a tool whose descriptor digest changed.
	KindChanged = drift.KindChanged
)

// Change classes (see package drift). A class only informs review.
const (
	// ClassTextOnly marks a change of display text.
	ClassTextOnly = drift.ClassTextOnly
	// ClassSchemaWidened marks a schema change that lets more instances validate.
	ClassSchemaWidened = drift.ClassSchemaWidened
	// ClassSchemaNarrowed marks a schema change that lets fewer instances validate.
	ClassSchemaNarrowed = drift.ClassSchemaNarrowed
	// ClassAnnotationChanged marks a change under a tool's "annotations" other than its title.
	ClassAnnotationChanged = drift.ClassAnnotationChanged
	// ClassNewTool marks a tool the reviewed snapshot does not have.
	ClassNewTool = drift.ClassNewTool
	// ClassRemovedTool marks a reviewed tool the candidate no longer lists.
	ClassRemovedTool = drift.ClassRemovedTool
	// ClassProtocolChange marks a changed negotiated protocol revision.
	ClassProtocolChange = drift.ClassProtocolChange
	// ClassOtherField marks any other change.
	ClassOtherField = drift.ClassOtherField
)

// FlagURLAdded is drift.FlagURLAdded.
const FlagURLAdded = drift.FlagURLAdded

// Change is one field-level difference inside a tool descriptor (drift.Change).
type Change = drift.Change

// ToolDiff is the difference of one tool (drift.ToolDiff).
type ToolDiff = drift.ToolDiff

// Report is the reviewer's view of a drift (drift.Report).
type Report = drift.Report

// Compare is drift.Compare: the field-level report of the difference between the reviewed
// snapshot and a candidate.
func Compare(reviewed, candidate *snapshot.ToolSnapshot) (*Report, error) {
	return drift.Compare(reviewed, candidate)
}

// Classes lists every change class in report order (drift.Classes).
var Classes = drift.Classes
