package adapters

// StepError is the failure of a step of the adapters' own that no library names (reading a
// Secret, listing trust policies, building a freeze's binding): Step is one of the
// controllers.StepX refusal names, Err the cause. It carries no message of its own; the
// controllers' activation table turns it into a stage outcome (activation.ClassifyVerifyError,
// activation.ClassifyFreezeError).
type StepError struct {
	// Step is the stable refusal name of the step (controllers.StepX).
	Step string
	// Err is the cause; nil when the step itself is the whole reason.
	Err error
}

func (e *StepError) Error() string {
	if e.Err == nil {
		return "adapters: " + e.Step
	}
	return "adapters: " + e.Step + ": " + e.Err.Error()
}

// Refusal returns the step's refusal name.
func (e *StepError) Refusal() string { return e.Step }

// Unwrap returns the cause.
func (e *StepError) Unwrap() error { return e.Err }

// step wraps err as the failure of step.
func step(name string, err error) *StepError { return &StepError{Step: name, Err: err} }
