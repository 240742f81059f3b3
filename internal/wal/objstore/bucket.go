package objstore

import (
	"context"
	"fmt"
	"net/url"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"gocloud.dev/blob"
	"gocloud.dev/blob/s3blob"

	"github.com/flowplane/flowplane/internal/state"
)

// S3 is an S3 or S3-compatible bucket as ArkFlow's object-store WAL names
// its settings.
type S3 struct {
	Bucket          string
	Region          string // default us-east-1
	Endpoint        string // S3-compatible endpoint; requests then use path-style addressing
	AccessKeyID     string // with SecretAccessKey; empty: the SDK's default credential chain
	SecretAccessKey string
}

// OpenS3 opens the bucket. It cannot go through state.OpenBucket, whose
// URLs carry no credentials, so it builds the aws-sdk-go-v2 client itself
// with the same choices for an S3-compatible endpoint (path style,
// checksums only when required).
func OpenS3(ctx context.Context, c S3) (*blob.Bucket, error) {
	region := c.Region
	if region == "" {
		region = "us-east-1"
	}
	loads := []func(*awsconfig.LoadOptions) error{awsconfig.WithRegion(region)}
	if c.AccessKeyID != "" {
		loads = append(loads, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(c.AccessKeyID, c.SecretAccessKey, "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, loads...)
	if err != nil {
		return nil, fmt.Errorf("objstore: AWS configuration: %w", err)
	}
	var opts s3blob.Options
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if c.Endpoint != "" {
			o.BaseEndpoint = aws.String(c.Endpoint)
			o.UsePathStyle = true
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		}
	})
	if c.Endpoint != "" {
		opts.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
	}
	return s3blob.OpenBucket(ctx, client, c.Bucket, &opts)
}

// OpenURL opens a file:// bucket (creating its directory) or an s3://
// bucket (credentials from the SDK's default chain) as state.OpenBucket
// does.
func OpenURL(ctx context.Context, raw string) (*blob.Bucket, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("objstore: bucket URL is not a URL")
	}
	return state.OpenBucket(ctx, u, u.Scheme == "file")
}
