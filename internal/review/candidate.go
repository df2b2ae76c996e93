package review

import (
	"encoding/json"
	"errors"
	"fmt"

	apiv1 "github.com/b10x/connector-mcp/api/v1"
	"github.com/b10x/connector-mcp/snapshot"
)

// Refusal names of CandidateOf.
const (
	// RefusalProfileMismatch: the profile document is not the reviewed snapshot the recorded
	// candidate was compared with.
	RefusalProfileMismatch = "review_profile_mismatch"
	// RefusalIncomplete: the review was recorded without descriptors (CandidateTooLarge).
	RefusalIncomplete = "review_incomplete"
	// RefusalCandidateMismatch: the candidate rebuilt from the review does not have the recorded
	// candidate digest.
	RefusalCandidateMismatch = "review_candidate_mismatch"
)

var (
	// ErrProfileMismatch is the reason of RefusalProfileMismatch.
	ErrProfileMismatch = errors.New("profile is not the reviewed snapshot of the review")
	// ErrIncomplete is the reason of RefusalIncomplete.
	ErrIncomplete = errors.New("review holds no descriptors")
	// ErrCandidateMismatch is the reason of RefusalCandidateMismatch.
	ErrCandidateMismatch = errors.New("rebuilt candidate differs from the recorded one")
)

// CandidateOf rebuilds the candidate snapshot the operator froze from the reviewed profile
// document and the recorded McpSnapshotReview (reviewed descriptors, minus removed tools, plus
// the recorded added and changed descriptors) and checks that its digest is the recorded
// candidate digest, so the result is exactly what the operator saw.
func CandidateOf(doc *apiv1.ProfileDocument, rv *apiv1.McpSnapshotReview) (*snapshot.ToolSnapshot, error) {
	if doc == nil || rv == nil {
		return nil, &Error{Name: RefusalInvalidSnapshot, Err: ErrInvalidSnapshot}
	}
	sp := rv.Spec
	if doc.Snapshot.Digest != sp.ReviewedSnapshotDigest {
		return nil, &Error{Name: RefusalProfileMismatch, Err: fmt.Errorf("%w: the profile records %s, the review was made against %s",
			ErrProfileMismatch, doc.Snapshot.Digest, sp.ReviewedSnapshotDigest)}
	}
	complete := false
	for _, c := range rv.Status.Conditions {
		if c.Type == apiv1.ReviewConditionRecorded && c.Reason == apiv1.ReasonCandidateComplete {
			complete = true
		}
	}
	if !complete {
		return nil, &Error{Name: RefusalIncomplete, Err: fmt.Errorf("%w: the candidate exceeded the review bound; snapshot the server instead", ErrIncomplete)}
	}
	descs := map[string]json.RawMessage{}
	for _, t := range doc.Snapshot.Tools {
		descs[t.Name] = t.Descriptor.Raw
	}
	for _, n := range sp.Removed {
		delete(descs, n)
	}
	for _, t := range append(append([]apiv1.ReviewTool(nil), sp.Added...), sp.Changed...) {
		if t.Descriptor == nil {
			return nil, &Error{Name: RefusalIncomplete, Tool: t.Name, Err: fmt.Errorf("%w: no recorded descriptor", ErrIncomplete)}
		}
		descs[t.Name] = t.Descriptor.Raw
	}
	list := make([]json.RawMessage, 0, len(descs))
	for _, d := range descs {
		list = append(list, d)
	}
	cand, err := snapshot.New(sp.ProtocolVersion, snapshot.ServerInfo{Name: sp.ServerInfo.Name, Title: sp.ServerInfo.Title, Version: sp.ServerInfo.Version}, list)
	if err != nil {
		return nil, &Error{Name: RefusalCandidateMismatch, Err: fmt.Errorf("%w: %w", ErrCandidateMismatch, err)}
	}
	if cand.Digest != sp.CandidateSnapshotDigest {
		return nil, &Error{Name: RefusalCandidateMismatch, Err: fmt.Errorf("%w: rebuilt %s, recorded %s", ErrCandidateMismatch, cand.Digest, sp.CandidateSnapshotDigest)}
	}
	return cand, nil
}
