package all

import (
	_ "github.com/flowplane/flowplane/internal/connect/buffer"
	_ "github.com/flowplane/flowplane/internal/connect/codec"
	_ "github.com/flowplane/flowplane/internal/connect/input"
	_ "github.com/flowplane/flowplane/internal/connect/kafka"
	_ "github.com/flowplane/flowplane/internal/connect/mongodb"
	_ "github.com/flowplane/flowplane/internal/connect/mqtt"
	_ "github.com/flowplane/flowplane/internal/connect/multi"
	_ "github.com/flowplane/flowplane/internal/connect/nats"
	_ "github.com/flowplane/flowplane/internal/connect/objectstore"
	_ "github.com/flowplane/flowplane/internal/connect/output"
	_ "github.com/flowplane/flowplane/internal/connect/processor"
	_ "github.com/flowplane/flowplane/internal/connect/redis"
	_ "github.com/flowplane/flowplane/internal/connect/sqldb"
	_ "github.com/flowplane/flowplane/internal/connect/sqlproc"
	_ "github.com/flowplane/flowplane/internal/connect/websocket"
)
