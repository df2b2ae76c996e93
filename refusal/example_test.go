package refusal_test

import (
	"fmt"

	"github.com/b10x/connector-mcp/refusal"
)

// tooLarge is a library's refusal type: it keeps its own fields and implements refusal.Named.
type tooLarge struct{ limit int }

func (e *tooLarge) Error() string {
	return fmt.Sprintf("lib: refused: frame_too_large (limit %d)", e.limit)
}
func (e *tooLarge) Refusal() string { return "frame_too_large" }

func ExampleName() {
	err := fmt.Errorf("tools/list: %w", &tooLarge{limit: 4096})
	fmt.Println(refusal.Name(err))
	fmt.Println(refusal.Name(fmt.Errorf("not a refusal")) == "")
	// Output:
	// frame_too_large
	// true
}

func ExampleClip() {
	fmt.Println(refusal.Clip("get_forecast", 64))
	fmt.Println(refusal.Clip("a-tool-name-a-hostile-server-made-very-long", 12))
	// Output:
	// get_forecast
	// a-tool-name-...
}
