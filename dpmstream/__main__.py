from dpmstream.cli import main

raise SystemExit(main())
