"""Written by `python -m dpmstream.parsers.profiles` (profiles.write_parsed): each bundled
profile file's TOML as tomllib reads it, under (CRC-32, length) of its bytes. Not to edit:
bundled_profile_data reads a file whose bytes differ with tomllib."""

FILES = {'dmlite-dome-notid.toml': ((2597936690, 5572),
                            {'name': 'dmlite-dome-notid',
                             'family': 'dome',
                             'description': 'DOME and dmlite via syslog, dmlite < 0.8.4: [LVL] '
                                            'dmlite WHERE FUNC : TEXT, no thread id',
                             'timezone': 'local',
                             'tags': ['dome', 'httpd', 'xrootd', 'globus-gridftp-server'],
                             'required_roles': ['call', 'command', 'returns'],
                             'envelope': {'traditional': '(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) '
                                                         '(?P<day>[ \\d]?\\d) '
                                                         '(?P<hour>\\d\\d):(?P<minute>\\d\\d):(?P<second>\\d\\d) '
                                                         '(?P<host>\\S+) '
                                                         '(?P<tag>[^\\s\\[:]+)(?:\\[(?P<pid>\\d+)\\])?: ',
                                          'rfc3339': '(?P<rtime>\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(?:\\.\\d{1,6})?(?:Z|[+-]\\d\\d:?\\d\\d)) '
                                                     '(?P<host>\\S+) '
                                                     '(?P<tag>[^\\s\\[:]+)(?:\\[(?P<pid>\\d+)\\])?: ',
                                          'message': '(?:\\[(?P<level>\\d)\\] |(?P<error>(?=dmlite '
                                                     '\\S+ !! )))dmlite '},
                             'journald': {'tags': ['systemd-journald', 'journal'],
                                          'suppressed': 'Suppressed (?P<lines>\\d+) messages from '
                                                        '(?:\\S*/)?(?P<program>[^\\s/@]+?)(?:@[^\\s/]*)?\\.service'},
                             'roles': {'call': "dome workerFunc : clientdn: '(?P<client_dn>.*?)' "
                                               "clienthost: '(?P<client_host>[^']*)' remoteclient: "
                                               "'(?P<remote_dn>.*?)' remoteclienthost: "
                                               "'(?P<remote_host>[^']*)'",
                                       'command': 'dome workerFunc : req:(?P<method>[A-Z]+) '
                                                  'cmd:(?P<op>\\w+) query:(?P<query>\\S*) '
                                                  'bodyitems: \\d+',
                                       'returns': '\\S+ SendSimpleResp : Exiting: code: '
                                                  '(?P<code>\\d{3})',
                                       'put': "dome dome_put : Entering\\. lfn: '(?P<lfn>.*)' "
                                              "addreplica: \\d+ pool: '[^']*' host: '[^']*' fs: "
                                              "'[^']*'",
                                       'put_selected': 'dome dome_put : Selected fs: '
                                                       "'(?P<server>[^:']+):(?P<fs>\\S+) from "
                                                       '(?P<matchings>\\d+) matchings for lfn: '
                                                       "'(?P<lfn>.*)'",
                                       'putdone_disk': 'dome dome_putdone_disk :  server: '
                                                       "'(?P<server>[^']*)' pfn: '(?P<pfn>[^']*)'  "
                                                       "size: (?P<size>\\d+) cksumt: '[^']*' "
                                                       "cksumv: '[^']*'",
                                       'putdone_forward': 'dome dome_putdone_disk :  Forwarding to '
                                                          "headnode\\. server: '(?P<server>[^']*)' "
                                                          "pfn: '(?P<pfn>[^']*)'  size: "
                                                          "(?P<size>\\d+) cksumt: '[^']*' cksumv: "
                                                          "'[^']*'",
                                       'putdone_head': 'dome dome_putdone_head :  server: '
                                                       "'(?P<server>[^']*)' pfn: '(?P<pfn>[^']*)'  "
                                                       "size: (?P<size>\\d+) cksumt: '[^']*' "
                                                       "cksumv: '[^']*'",
                                       'putdone_size': 'dome dome_putdone_head :  Final size:   '
                                                       '(?P<size>\\d+)',
                                       'putdone_error': 'dome !! dome_putdone_head : '
                                                        '(?P<reason>Replica not found|Invalid '
                                                        'status for replica|Not accessible|Cannot '
                                                        'fetch logical entry for replica) '
                                                        "'(?P<server>[^:']+):(?P<pfn>[^']*)'.*",
                                       'chksum_failed': 'dome dome_chksumstatus : Checksum '
                                                        'calculation failed\\. LFN: '
                                                        '(?P<lfn>.*?)PFN: (?P<pfn>.*)\\. Reason: '
                                                        '(?P<reason>.*)',
                                       'queue_timeout': 'dome \\w+ :  Queue item with key '
                                                        "'(?P<key>[^']*)' timed out after "
                                                        '(?P<timeout>\\d+) seconds\\.',
                                       'capacity': 'dome checkDiskSpaces : fs: (?P<fs>\\S+) phys: '
                                                   '(?P<phys>\\d+) free: (?P<free>\\d+)',
                                       'fs_count': 'dome checkDiskSpaces : Number of local '
                                                   'filesystems: (?P<count>\\d+)',
                                       'fs_enabled': 'dome checkDiskSpaces : Enabling filesystem: '
                                                     '(?P<server>\\S+) (?P<fs>\\S+)',
                                       'fs_disabled': 'dome !! checkDiskSpaces : Server down or '
                                                      'other trouble\\. Disabling filesystem: '
                                                      "'(?P<server>\\S+) (?P<fs>[^']+)'",
                                       'startup': 'dome DomeStatus : My automatically detected '
                                                  'hostname is: (?P<server>\\S+)',
                                       'other': ['\\S+ !! \\S+ : .*', '\\S+ \\S+ : .*']}}),
 'dmlite-dome.toml': ((4281974041, 5494),
                      {'name': 'dmlite-dome',
                       'family': 'dome',
                       'description': 'DOME and dmlite frontends via syslog: {TID}[LVL] dmlite '
                                      'WHERE FUNC : TEXT',
                       'timezone': 'local',
                       'tags': ['dome', 'httpd', 'xrootd', 'globus-gridftp-server'],
                       'required_roles': ['call', 'command', 'returns'],
                       'envelope': {'traditional': '(?P<mon>Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) '
                                                   '(?P<day>[ \\d]?\\d) '
                                                   '(?P<hour>\\d\\d):(?P<minute>\\d\\d):(?P<second>\\d\\d) '
                                                   '(?P<host>\\S+) '
                                                   '(?P<tag>[^\\s\\[:]+)(?:\\[(?P<pid>\\d+)\\])?: ',
                                    'rfc3339': '(?P<rtime>\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(?:\\.\\d{1,6})?(?:Z|[+-]\\d\\d:?\\d\\d)) '
                                               '(?P<host>\\S+) '
                                               '(?P<tag>[^\\s\\[:]+)(?:\\[(?P<pid>\\d+)\\])?: ',
                                    'message': '\\{(?P<tid>\\d+)\\}(?:\\[(?P<level>\\d)\\]|(?P<error>!!!)) '
                                               'dmlite '},
                       'journald': {'tags': ['systemd-journald', 'journal'],
                                    'suppressed': 'Suppressed (?P<lines>\\d+) messages from '
                                                  '(?:\\S*/)?(?P<program>[^\\s/@]+?)(?:@[^\\s/]*)?\\.service'},
                       'roles': {'accept': 'dome workerFunc : Accepted connection, ipcfd: \\d+, '
                                           'keepConnection: \\d+',
                                 'call': "dome workerFunc : clientdn: '(?P<client_dn>.*?)' "
                                         "clienthost: '(?P<client_host>[^']*)' remoteclient: "
                                         "'(?P<remote_dn>.*?)' remoteclienthost: "
                                         "'(?P<remote_host>[^']*)'",
                                 'command': 'dome workerFunc : req:(?P<method>[A-Z]+) '
                                            'cmd:(?P<op>\\w+) query:(?P<query>\\S*) bodyitems: '
                                            '\\d+',
                                 'returns': '\\S+ SendSimpleResp : Exiting: code: (?P<code>\\d{3})',
                                 'put': "dome dome_put : Entering\\. lfn: '(?P<lfn>.*)' "
                                        "addreplica: \\d+ pool: '[^']*' host: '[^']*' fs: '[^']*'",
                                 'put_selected': 'dome dome_put : Selected fs: '
                                                 "'(?P<server>[^:']+):(?P<fs>\\S+) from "
                                                 '(?P<matchings>\\d+) matchings for lfn: '
                                                 "'(?P<lfn>.*)'",
                                 'putdone_disk': 'dome dome_putdone_disk :  server: '
                                                 "'(?P<server>[^']*)' pfn: '(?P<pfn>[^']*)'  size: "
                                                 "(?P<size>\\d+) cksumt: '[^']*' cksumv: '[^']*'",
                                 'putdone_forward': 'dome dome_putdone_disk :  Forwarding to '
                                                    "headnode\\. server: '(?P<server>[^']*)' pfn: "
                                                    "'(?P<pfn>[^']*)'  size: (?P<size>\\d+) "
                                                    "cksumt: '[^']*' cksumv: '[^']*'",
                                 'putdone_head': 'dome dome_putdone_head :  server: '
                                                 "'(?P<server>[^']*)' pfn: '(?P<pfn>[^']*)'  size: "
                                                 "(?P<size>\\d+) cksumt: '[^']*' cksumv: '[^']*'",
                                 'putdone_size': 'dome dome_putdone_head :  Final size:   '
                                                 '(?P<size>\\d+)',
                                 'putdone_error': 'domedome_putdone_head : (?P<reason>Replica not '
                                                  'found|Invalid status for replica|Not '
                                                  'accessible|Cannot fetch logical entry for '
                                                  "replica) '(?P<server>[^:']+):(?P<pfn>[^']*)'.*",
                                 'chksum_failed': 'dome dome_chksumstatus : Checksum calculation '
                                                  'failed\\. LFN: (?P<lfn>.*?)PFN: (?P<pfn>.*)\\. '
                                                  'Reason: (?P<reason>.*)',
                                 'queue_timeout': 'dome \\w+ :  Queue item with key '
                                                  "'(?P<key>[^']*)' timed out after "
                                                  '(?P<timeout>\\d+) seconds\\.',
                                 'capacity': 'dome checkDiskSpaces : fs: (?P<fs>\\S+) phys: '
                                             '(?P<phys>\\d+) free: (?P<free>\\d+)',
                                 'fs_count': 'dome checkDiskSpaces : Number of local filesystems: '
                                             '(?P<count>\\d+)',
                                 'fs_enabled': 'dome checkDiskSpaces : Enabling filesystem: '
                                               '(?P<server>\\S+) (?P<fs>\\S+)',
                                 'fs_disabled': 'domecheckDiskSpaces : Server down or other '
                                                'trouble\\. Disabling filesystem: '
                                                "'(?P<server>\\S+) (?P<fs>[^']+)'",
                                 'startup': 'dome DomeStatus : My automatically detected hostname '
                                            'is: (?P<server>\\S+)',
                                 'other': ['\\S+ \\S+ : .*', '\\S+ : .*']}}),
 'lcgdm-dpm.toml': ((2062813945, 2636),
                    {'name': 'lcgdm-dpm',
                     'daemon': 'dpm',
                     'tags': ['dpm', 'dpm-daemon'],
                     'description': 'DPM daemon (dpm_srv_* functions, DP092/DP098 messages, '
                                    'slow-thread processing)',
                     'timezone': 'local',
                     'func': '(?:dpm_\\w+|sendrep)',
                     'required_roles': ['call', 'returns', 'token', 'status', 'slow_start'],
                     'envelope': {'native': '(?P<month>\\d\\d)/(?P<day>\\d\\d) '
                                            '(?P<hour>\\d\\d):(?P<minute>\\d\\d):(?P<second>\\d\\d)(?:\\.(?P<frac>\\d{1,6}))? '
                                            '+(?P<pid>\\d+)(?:,(?P<tid>\\d+))? (?P<func>[^\\s:]+): '
                                            '?',
                                  'rsyslog': '(?P<rtime>\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(?:\\.\\d+)?(?:Z|[+-]\\d\\d:\\d\\d)) '
                                             '(?P<host>\\S+) '
                                             '(?:(?P<tag>[^\\s:\\[]+)(?:\\[\\d+\\])?: ?)?'},
                     'roles': {'accept': '\\[[^\\]]*\\] \\((?P<client>[^)]*)\\): request accepted',
                               'conn_failure': ['\\[[^\\]]*\\] \\([^)]*\\): (?:Could not establish '
                                                'an authenticated connection|Failure getting the '
                                                'request).*',
                                                'DP002 - (?:netread|send) error.*'],
                               'call': 'DP092 - (?P<op>\\w+) request by .* \\(\\d+,[\\d,]+\\) from '
                                       '(?P<client>\\S+)',
                               'token': ['DP098 - (?P<op>\\w+) (?P<nfiles>\\d+) '
                                         '(?P<token>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})',
                                         'DP098 - (?P<op>\\w+) '
                                         '(?P<token>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})(?: '
                                         '(?P<nfiles>\\d+))?'],
                               'file': 'DP098 - (?P<op>\\w+) (?P<index>\\d+) (?P<surl>\\S+)',
                               'detail': 'DP098 - .*',
                               'slow_start': 'processing (?P<op>put|get) request '
                                             '(?P<token>[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})',
                               'status': 'request status DPM_(?P<state>[A-Z_]+)',
                               'returns': 'returns (?P<rc>-?\\d+)',
                               'startup': 'started\\b.*',
                               'other': ['selected .*', 'DP\\d\\d\\d - .*']}}),
 'lcgdm-ns.toml': ((1104575333, 1652),
                   {'name': 'lcgdm-ns',
                    'daemon': 'dpns',
                    'tags': ['dpns', 'dpnsdaemon', 'lfc', 'lfcdaemon', 'lfc-dli'],
                    'description': 'DPNS/LFC name server (Cns_srv_* functions, NS092/NS098 '
                                   'messages)',
                    'timezone': 'local',
                    'func': '(?:Cns_\\w+|sendrep)',
                    'required_roles': ['call', 'returns'],
                    'envelope': {'native': '(?P<month>\\d\\d)/(?P<day>\\d\\d) '
                                           '(?P<hour>\\d\\d):(?P<minute>\\d\\d):(?P<second>\\d\\d)(?:\\.(?P<frac>\\d{1,6}))? '
                                           '+(?P<pid>\\d+)(?:,(?P<tid>\\d+))? (?P<func>[^\\s:]+): '
                                           '?',
                                 'rsyslog': '(?P<rtime>\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(?:\\.\\d+)?(?:Z|[+-]\\d\\d:\\d\\d)) '
                                            '(?P<host>\\S+) '
                                            '(?:(?P<tag>[^\\s:\\[]+)(?:\\[\\d+\\])?: ?)?'},
                    'roles': {'accept': '\\[[^\\]]*\\] \\((?P<client>[^)]*)\\): request accepted',
                              'conn_failure': ['\\[[^\\]]*\\] \\([^)]*\\): (?:Could not establish '
                                               'an authenticated connection|Failure getting the '
                                               'request).*',
                                               'NS002 - (?:netread|send) error.*'],
                              'call': 'NS092 - (?P<op>\\w+) request by .* \\(\\d+,[\\d,]+\\) from '
                                      '(?P<client>\\S+)',
                              'detail': ['NS098 - \\w+ (?:\\d+ )?(?P<path>/\\S+).*', 'NS098 - .*'],
                              'returns': 'returns (?P<rc>-?\\d+)',
                              'startup': 'started\\b.*',
                              'other': ['file \\d+ created.*',
                                        'Trying to reconnect.*',
                                        'mysql_query error: .*',
                                        'NS\\d\\d\\d - .*']}}),
 'lcgdm-srm.toml': ((3492699839, 1289),
                    {'name': 'lcgdm-srm',
                     'daemon': 'srmv2.2',
                     'tags': ['srmv2.2', 'srmv2', 'srmv1', 'dpm-srmv2.2'],
                     'description': "SRM v2.2 daemon (SRM method as FUNC, 'request by' and SRM98 "
                                    'messages)',
                     'timezone': 'local',
                     'func': '(?!Cns_|Dpm_|dpm_)[A-Z]\\w+',
                     'required_roles': ['call', 'returns'],
                     'envelope': {'native': '(?P<month>\\d\\d)/(?P<day>\\d\\d) '
                                            '(?P<hour>\\d\\d):(?P<minute>\\d\\d):(?P<second>\\d\\d)(?:\\.(?P<frac>\\d{1,6}))? '
                                            '+(?P<pid>\\d+)(?:,(?P<tid>\\d+))? (?P<func>[^\\s:]+): '
                                            '?',
                                  'rsyslog': '(?P<rtime>\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d(?:\\.\\d+)?(?:Z|[+-]\\d\\d:\\d\\d)) '
                                             '(?P<host>\\S+) '
                                             '(?:(?P<tag>[^\\s:\\[]+)(?:\\[\\d+\\])?: ?)?'},
                     'roles': {'accept': '\\[[^\\]]*\\] \\((?P<client>[^)]*)\\): request accepted',
                               'conn_failure': ['\\[[^\\]]*\\] \\([^)]*\\): (?:Could not establish '
                                                'an authenticated connection|Failure getting the '
                                                'request).*',
                                                'SRM02 - (?:netread|send) error.*'],
                               'call': 'request by .* from (?P<client>\\S+)',
                               'detail': 'SRM98 - .*',
                               'returns': 'returns (?P<rc>-?\\d+)',
                               'startup': 'started\\b.*',
                               'other': ['SRM\\d\\d - .*']}})}
