package controllers

import (
	"slices"
	"testing"

	"github.com/b10x/connector-mcp/internal/activation"
)

// A pass runs exactly the activation table's deployment stages, in its order, each with its
// function. Twin: a pipeline with two stages swapped does not follow the table.
func TestDeploymentStagesFollowTheTable(t *testing.T) {
	follows := func(stages []deploymentStage) bool {
		var got []string
		for _, s := range stages {
			if s.run == nil {
				return false
			}
			got = append(got, s.condition)
		}
		return slices.Equal(got, activation.DeploymentConditions())
	}
	if !follows(deploymentStages) {
		t.Fatalf("the pass does not run the activation table's stages %v", activation.DeploymentConditions())
	}
	swapped := slices.Clone(deploymentStages)
	swapped[1], swapped[2] = swapped[2], swapped[1]
	if follows(swapped) {
		t.Fatal("twin: swapped stages were taken for the table's order")
	}
}
