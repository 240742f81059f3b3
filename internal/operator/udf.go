package operator

import (
	"errors"

	"github.com/flowplane/flowplane/internal/job"
)

func newUDF(id string, c *job.UDFConfig) (Operator, error) {
	return nil, errors.New("udf: not yet")
}
