package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/airlockhq/airlock/internal/testenv/testport"
	"github.com/airlockhq/airlock/internal/testenv/testreq"
)

// BinEnv names the versitygw binary when it is not at DefaultBin or on
// PATH.
const BinEnv = "AIRLOCK_TEST_VERSITYGW"

// DefaultBin is where scripts/test.sh installs versitygw.
const DefaultBin = "/usr/local/lib/airlock/bin/versitygw"

// Region is the region the server and its clients are told.
const Region = "us-east-1"

// Server is a running versitygw over a temporary directory.
type Server struct {
	// Endpoint is the gateway's base URL (http://127.0.0.1:PORT).
	Endpoint string
	// Bucket is the bucket made at start.
	Bucket string
	// AccessKey and SecretKey are the one identity it accepts (root).
	AccessKey, SecretKey string
}

// BucketURL is the blob/s3 URL of the bucket, with extra query
// parameters (e.g. "prefix=a/") appended.
func (s *Server) BucketURL(extra ...string) string {
	q := url.Values{}
	q.Set("endpoint", s.Endpoint)
	q.Set("region", Region)
	q.Set("use_path_style", "true")
	u := "s3://" + s.Bucket + "?" + q.Encode()
	for _, e := range extra {
		u += "&" + e
	}
	return u
}

// Env is the environment a client process needs for the credentials.
func (s *Server) Env() []string {
	return []string{"AWS_ACCESS_KEY_ID=" + s.AccessKey, "AWS_SECRET_ACCESS_KEY=" + s.SecretKey, "AWS_REGION=" + Region}
}

// SetEnv sets the credentials in this process's environment for the
// test (t.Setenv: the test must not be parallel).
func (s *Server) SetEnv(t testing.TB) {
	t.Setenv("AWS_ACCESS_KEY_ID", s.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", s.SecretKey)
	t.Setenv("AWS_REGION", Region)
	// No shared config file of the machine may change what the test uses.
	t.Setenv("AWS_CONFIG_FILE", os.DevNull)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", os.DevNull)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
}

// Client is an S3 client of the server (for what airlock.Blobs cannot
// say: listing, making buckets).
func (s *Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

// Bin returns the versitygw binary, or skips the test (through testreq)
// when there is none.
func Bin(t testing.TB) string {
	t.Helper()
	if p := os.Getenv(BinEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			testreq.Skipf(t, "%s=%s: %v", BinEnv, p, err)
		}
		return p
	}
	if _, err := os.Stat(DefaultBin); err == nil {
		return DefaultBin
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	testreq.Skipf(t, "the S3 gateway versitygw is not installed at %s or on PATH (scripts/test.sh builds it; or set %s)", DefaultBin, BinEnv)
	return ""
}

// Start starts versitygw over a temporary directory with one bucket, and
// waits until an object can be written to and read from the bucket; the
// cleanup ends the server and removes its data.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := Bin(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o700); err != nil {
		t.Fatal(err)
	}
	s := &Server{Bucket: "airlock-test", AccessKey: "AKAIRLOCKTEST" + randHex(4), SecretKey: randHex(20)}
	logPath := filepath.Join(dir, "versitygw.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { logf.Close() })

	// The port is chosen free a moment before the gateway binds it; if
	// another process takes it in between, the gateway exits and we try
	// another.
	var (
		cmd    *exec.Cmd
		exited chan struct{}
	)
	for attempt := 0; ; attempt++ {
		port := freePorts(t, 1)[0]
		s.Endpoint = "http://127.0.0.1:" + strconv.Itoa(port)
		cmd = exec.Command(bin,
			"--port", "127.0.0.1:"+strconv.Itoa(port),
			"--region", Region,
			"--quiet", // no access log lines on stdout
			"posix", data)
		cmd.Dir = dir
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.Env = append(os.Environ(), "HOME="+dir,
			"ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start versitygw: %v", err)
		}
		exited = make(chan struct{})
		go func(cmd *exec.Cmd, exited chan struct{}) { cmd.Wait(); close(exited) }(cmd, exited)
		if listening(port, exited) || attempt == 2 {
			break
		}
		// Not listening: it exited (the port was taken) or hangs; end it
		// before the next try.
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		if t.Failed() {
			tailLog(t, logPath)
		}
	})

	// Ready when the bucket is made and an object can be written and read
	// back.
	client := s.Client()
	var lastErr error
	ok := testreq.Poll(30*time.Second, func() bool {
		select {
		case <-exited:
			lastErr = errors.New("versitygw exited")
			return true
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, lastErr = client.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(s.Bucket)})
		if lastErr != nil {
			var owned interface{ ErrorCode() string }
			if errors.As(lastErr, &owned) && (owned.ErrorCode() == "BucketAlreadyOwnedByYou" || owned.ErrorCode() == "BucketAlreadyExists") {
				lastErr = nil
			}
		}
		if lastErr != nil {
			return false
		}
		_, lastErr = client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(".ready"), Body: bytes.NewReader([]byte("ok"))})
		if lastErr == nil {
			var out *s3.GetObjectOutput
			out, lastErr = client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(".ready")})
			if lastErr == nil {
				b, err := io.ReadAll(out.Body)
				out.Body.Close()
				if err == nil && string(b) != "ok" {
					err = fmt.Errorf("read back %q, wrote %q", b, "ok")
				}
				lastErr = err
			}
		}
		if lastErr == nil {
			_, lastErr = client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.Bucket), Key: aws.String(".ready")})
		}
		return lastErr == nil
	})
	if !ok || lastErr != nil {
		tailLog(t, logPath)
		t.Fatalf("versitygw at %s not ready: %v", s.Endpoint, lastErr)
	}
	return s
}

// listening waits until something accepts connections on the loopback
// port (true) or the process exits (false).
func listening(port int, exited <-chan struct{}) bool {
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var up bool
	testreq.Poll(30*time.Second, func() bool {
		select {
		case <-exited:
			return true
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			up = true
		}
		return up
	})
	return up
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago (held open until all are chosen, so they differ).
func freePorts(t testing.TB, n int) []int {
	t.Helper()
	return testport.Ports(t, n)
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func tailLog(t testing.TB, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return
	}
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	t.Logf("versitygw log (last 4000 bytes):\n%s", b)
}
