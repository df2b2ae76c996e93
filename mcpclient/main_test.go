package mcpclient

import (
	"os"
	"testing"

	"github.com/b10x/connector-mcp/internal/mcptest"
)

func TestMain(m *testing.M) {
	mcptest.RunIfServer()
	runIfTranscriptServer()
	os.Exit(m.Run())
}
